"""tcmp.daemon: `tcmp watch`, the daemon that condenses every finished dump file into the SQLite index.

Modules, one concern each: watch (inotify events), scan (listing the tree), dispatch (what to examine when),
convert (the worker processes), writer (the index writer thread), retention (raw file deletion), service (life
cycle, sd_notify, signals), status (`tcmp status`), capture (torchair configs that switch the dumps on).
"""
