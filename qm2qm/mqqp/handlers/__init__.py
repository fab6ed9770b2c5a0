"""The qm2qm opnum handlers (MS-MQQP 3.1.4.1–3.1.4.11): one module per method, bullets in the spec's order.

Each module has the processing rules as a function over decoded values and ``serve(service, ctx, stub)``,
the wire form the runtime calls (decode with qm2qm.mqqp.codec, apply the rules, encode)."""
