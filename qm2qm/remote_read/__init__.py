"""The remote read shared by both of its wire forms: qm2qm (MS-MQQP 3.1.4) and RemoteRead (MS-MQRR 3.1.4).

Pending reads, messages Locked by a receive until its End (ACK/NACK), their release on close or rundown, the
inline fast path and the packet memo live here once, over shared_adm events (MS-MQDMPR 3.1.7.1.10–17). The
protocol packages keep only their own ADM names, wire codecs, bullet order and status choices.
"""
