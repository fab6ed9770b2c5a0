"""MS-MQSD: Directory Service Discovery Protocol (codec, UDP responder, client procedure)."""
