"""Deletion vectors as Paimon stores them: the byte codec of one vector (``codec``) and the DELETION_VECTORS
index files that hold the vectors of a bucket (``index_file``)."""
