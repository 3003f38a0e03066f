"""Wrappers over ``UnityEnvironment`` for gymnasium and PettingZoo (not in 0.28; 0.29 had
old-API versions). Each module imports its library only when used."""
