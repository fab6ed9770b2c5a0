"""The qmcomm handlers (MS-MQMP 3.1.4.1–3.1.4.4, 3.1.4.24) and the supporting-server gate (3.1.4, 3.1.5): one module
per method with the processing rules over decoded values and ``serve(service, ctx, stub)``, the wire form."""
