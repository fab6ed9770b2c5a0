"""The MS-MQRR opnum handlers (3.1.4.1–3.1.4.15): one module per method, bullets in the spec's order; each has
``serve(service, ctx, stub)``, the wire form the runtime calls."""
