"""MS-MQCN: Directory Service Change Notification Protocol (codec, server role, client role, signature check)."""
