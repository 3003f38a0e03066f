"""``gym_unity`` 0.28 (Unity's gym wrapper package) on the drop-in: ``gym_unity.envs`` holds
``UnityToGymWrapper`` with the old gym API, over gymnasium's spaces (gym 0.20 no longer
builds)."""
