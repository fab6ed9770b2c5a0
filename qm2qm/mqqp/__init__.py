"""The qm2qm interface (MS-MQQP): import qm2qm.mqqp.codec, .constants or .idl directly; nothing is re-exported here."""
