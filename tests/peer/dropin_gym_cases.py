"""The cases of upstream's gym wrapper test (`gym-unity/gym_unity/tests/test_gym.py`, 0.28),
written anew against the drop-in's `UnityToGymnasiumEnv` (gym_unity's `UnityToGymWrapper` with
gymnasium's API; the upstream file is not in any wheel and may not be copied). Upstream drives
a mock environment; here each case drives a real stand-in scene with the same shapes. Each
case names the upstream test it mirrors.

Usage: MLAGENTS_SIM=PATH/TO/mlagents-sim python dropin_gym_cases.py
"""
import numpy as np
from gymnasium import spaces

from mlagents_envs.environment import UnityEnvironment
from mlagents_envs.envs.gymnasium_env import UnityGymException, UnityToGymnasiumEnv
from report import check, finish


def unity(scene: str) -> UnityEnvironment:
    return UnityEnvironment(f"sim:{scene}", base_port=0, seed=1, no_graphics=True)


def case(name: str, mirrors: str):
    """Runs the decorated case, reporting an exception as its failure."""

    def run(function):
        try:
            function()
        except Exception as error:  # noqa: BLE001 - reported as the failure
            check(False, f"{name} (mirrors {mirrors}): {type(error).__name__}: {error}")
        return function

    return run


@case("vector observations, discrete actions", "test_gym_wrapper")
def _():
    env = UnityToGymnasiumEnv(unity("Basic"))
    try:
        observation, info = env.reset()
        action = env.action_space.sample()
        result = env.step(action)
        observation_2, reward, terminated, truncated, info_2 = result
        check(isinstance(observation, np.ndarray) and observation.shape == (20,) and "step" in info
              and isinstance(env.action_space, spaces.Discrete) and env.action_space.n == 3
              and isinstance(observation_2, np.ndarray) and isinstance(reward, float)
              and isinstance(terminated, bool) and isinstance(truncated, bool) and isinstance(info_2, dict),
              "test_gym_wrapper: reset gives an ndarray observation, step an (ndarray, float, bool, bool, dict)")
    finally:
        env.close()


@case("branched discrete actions flattened", "test_branched_flatten")
def _():
    flat = UnityToGymnasiumEnv(unity("Simple2DDiscrete"), flatten_branched=True)
    try:
        lookup = flat._flattener.lookup_action
        check(isinstance(flat.action_space, spaces.Discrete) and flat.action_space.n == 4
              and lookup(0) == [0, 0] and lookup(1) == [0, 1] and lookup(3) == [1, 1],
              f"test_branched_flatten: branches [2, 2] flattened to {flat.action_space}, 0 -> {lookup(0)}, 3 -> {lookup(3)}")
        flat.reset()
        _, reward, *_ = flat.step(3)
        check(isinstance(reward, float), "test_branched_flatten: a flattened action steps the scene")
    finally:
        flat.close()
    branched = UnityToGymnasiumEnv(unity("Simple2DDiscrete"), flatten_branched=False)
    try:
        check(isinstance(branched.action_space, spaces.MultiDiscrete) and list(branched.action_space.nvec) == [2, 2],
              f"test_branched_flatten: unflattened, the action space is {branched.action_space}")
    finally:
        branched.close()


@case("one branch with and without flattening", "test_action_space")
def _():
    for flatten in (True, False):
        env = UnityToGymnasiumEnv(unity("Simple1DDiscrete"), flatten_branched=flatten)
        try:
            check(isinstance(env.action_space, spaces.Discrete) and env.action_space.n == 2,
                  f"test_action_space: one branch of 2 is Discrete(2) with flatten_branched={flatten}")
        finally:
            env.close()


@case("seeded action sampling", "test_action_space_seed")
def _():
    samples = []
    for _ in range(2):
        env = UnityToGymnasiumEnv(unity("Simple2DDiscrete"), flatten_branched=True, action_space_seed=1337)
        try:
            samples.append([int(env.action_space.sample()) for _ in range(20)])
        finally:
            env.close()
    check(samples[0] == samples[1], f"test_action_space_seed: action_space_seed=1337 samples the same actions twice {samples[0][:6]}...")


@case("one image", "test_gym_wrapper_visual")
def _():
    for uint8 in (False, True):
        env = UnityToGymnasiumEnv(unity("SimpleVisualDiscrete"), uint8_visual=uint8)
        try:
            observation, _ = env.reset()
            observation_2, *_ = env.step(env.action_space.sample())
            dtype = np.uint8 if uint8 else np.float32
            top = 255 if uint8 else 1.0
            check(env.observation_space.shape == (20, 20, 3) and env.observation_space.dtype == dtype
                  and observation.dtype == dtype and observation_2.shape == (20, 20, 3)
                  and observation.min() >= 0 and observation.max() <= top and env.observation_space.contains(observation),
                  f"test_gym_wrapper_visual (uint8_visual={uint8}): a {env.observation_space.shape} {dtype.__name__} image "
                  f"in [0, {top}]")
        finally:
            env.close()


@case("images and a vector", "test_gym_wrapper_single_visual_and_vector / test_gym_wrapper_multi_visual_and_vector")
def _():
    for uint8 in (False, True):
        env = UnityToGymnasiumEnv(unity("SimpleVisualVector"), uint8_visual=uint8, allow_multiple_obs=True)
        try:
            observation, _ = env.reset()
            observation_2, *_ = env.step(env.action_space.sample())
            shapes = [box.shape for box in env.observation_space.spaces]
            check(isinstance(env.observation_space, spaces.Tuple) and shapes == [(20, 20, 3), (20, 20, 3), (1,)]
                  and isinstance(observation, list) and [o.shape for o in observation_2] == shapes
                  and observation[0].dtype == (np.uint8 if uint8 else np.float32) and observation[2].dtype == np.float32,
                  f"test_gym_wrapper_multi_visual_and_vector (uint8_visual={uint8}, allow_multiple_obs): a list, "
                  f"the two images then the vector, {shapes}")
        finally:
            env.close()
        env = UnityToGymnasiumEnv(unity("SimpleVisualVector"), uint8_visual=uint8, allow_multiple_obs=False)
        try:
            observation, _ = env.reset()
            check(env.observation_space.shape == (20, 20, 3) and isinstance(observation, np.ndarray)
                  and observation.shape == (20, 20, 3),
                  f"test_gym_wrapper_single_visual_and_vector (uint8_visual={uint8}, not allow_multiple_obs): the first image only")
        finally:
            env.close()


@case("refused scenes", "test_gym_wrapper (the wrapper's exceptions)")
def _():
    for scene, message in (("3DBall", "one Agent"), ("Ghost1D", "one behavior")):
        try:
            UnityToGymnasiumEnv(unity(scene)).close()
            check(False, f"{scene} is refused")
        except UnityGymException as error:
            check(message in str(error), f"{scene} is refused with UnityGymException: {error}")


finish()
