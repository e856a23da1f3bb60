"""tcmp.daemon: `tcmp watch`, the daemon that condenses every finished dump file into the SQLite index.

Modules, one concern each: inotify (watchdog's events), scan and roots (listing the trees), dispatch (what to
examine when), examine (the worker processes: place, check and summarize one file), writer_thread and index_slots
(the index writer thread, and keeping each index writable), retention (raw file deletion), service (life cycle,
sd_notify, signals), status (`tcmp status`), capture (torchair configs that switch the dumps on), demo (`tcmp demo`).
"""
