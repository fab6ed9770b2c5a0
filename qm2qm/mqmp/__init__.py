"""The qmcomm and qmcomm2 interfaces (MS-MQMP): the remote-read subset a plain queue manager serves (3.1.4.1–3.1.4.4,
3.1.4.24) and the MS-MQMP 3.1.4 / 3.1.5 supporting-server gate for everything else."""
