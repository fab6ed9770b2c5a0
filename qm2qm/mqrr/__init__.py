"""MS-MQRR RemoteRead (1a9134dd-7b39-45ba-ad88-44d01ca47f28 v1.0): the second wire form of the remote read,
on qm2qm.remote_read and the same QueueManager as qm2qm (MS-MQQP)."""
