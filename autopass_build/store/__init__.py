"""`.autopass/`: the SQLite index over the content-addressed blobs (index), what it
holds as typed records (build_records), the spool's records checked on the way in
(spool_records), where the tree was recorded (location), targets and their units
(targets), and the lock that lets one command at a time time the benchmark (busy)."""
