"""The small core every pack stands on: settings, errors, breakers, health."""
