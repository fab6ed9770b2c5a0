import sqlite3, os, time, sys, random
def run(schema, n=20000, per=4, body=1024):
    p='/tmp/r13/t.db'
    for s in ('','-wal','-shm'):
        try: os.unlink(p+s)
        except FileNotFoundError: pass
    c=sqlite3.connect(p,isolation_level=None)
    c.execute("PRAGMA journal_mode=WAL"); c.execute("PRAGMA synchronous=NORMAL"); c.execute("PRAGMA wal_autocheckpoint=0")
    c.execute(schema)
    c.execute("BEGIN")
    c.executemany("INSERT INTO messages VALUES (?,?,?,?,?,?)", [('q1', i, 0, os.urandom(body), None, None) for i in range(n)])
    c.execute("COMMIT"); c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    t0=time.process_time(); w0=time.perf_counter()
    i=0; commits=0
    while i+per<=n:
        c.execute("BEGIN IMMEDIATE")
        c.executemany("DELETE FROM messages WHERE queue_identifier=? AND lookup_identifier=?", [('q1',j) for j in range(i,i+per)])
        c.execute("COMMIT"); i+=per; commits+=1
        if commits%250==0: c.execute("PRAGMA wal_checkpoint(PASSIVE)")
    t=time.process_time()-t0
    return t/commits*1e6
A="CREATE TABLE messages (queue_identifier TEXT NOT NULL, lookup_identifier INTEGER NOT NULL, state INTEGER NOT NULL, compact BLOB, attributes TEXT, body BLOB, PRIMARY KEY (queue_identifier, lookup_identifier))"
B=A+" WITHOUT ROWID"
for name,s,per in [("rowid+pk 4",A,4),("rowid+pk 64",A,64),("rowid+pk 256",A,256)]:
    print(name, '%.1f us/msg'%(run(s,per=per)/per))
