"""EtcdBackup and EtcdRestore: plans, the controllers, the stores, and the Jobs' programs (``job``, ``restore_job``)."""
