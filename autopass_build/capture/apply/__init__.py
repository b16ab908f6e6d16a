"""Apply mode of the compiler wrapper: the flags database's answer for one compile or
link (applier, to_apply, applied_profiles, applied_bolt, trusted_db, bitcode), run
(apply_mode), counted (tally), and `apply --train`'s builds (train_cache).  Runs inside
every compile of a user's build, like record/."""
