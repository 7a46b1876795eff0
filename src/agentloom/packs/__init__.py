"""One subpackage per subsystem; each exposes a `Pack` through the `agentloom.packs` entry points."""
