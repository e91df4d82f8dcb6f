//! Nemeses: faults paired with their undo, one file per family, schedules from `nemesis/*.toml`.
