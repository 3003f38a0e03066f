"""The cases of upstream's gym wrapper test (`gym-unity/gym_unity/tests/test_gym.py`, 0.28),
written anew (the upstream file is not in any wheel and may not be copied) and run against both
of the drop-in's wrappers: `gym_unity.envs.UnityToGymWrapper` (0.28's old gym API) and
`mlagents_envs.envs.gymnasium_env.UnityToGymnasiumEnv` (gymnasium's). Upstream drives a mock
environment; here each case drives a real stand-in scene with the same shapes. Each case names
the upstream test it mirrors.

Usage: MLAGENTS_SIM=PATH/TO/mlagents-sim python dropin_gym_cases.py
"""
import numpy as np
from gymnasium import spaces

from mlagents_envs.environment import UnityEnvironment
import gym_unity.envs
from mlagents_envs.envs.gymnasium_env import UnityGymException, UnityToGymnasiumEnv
from report import check, finish


def unity(scene: str) -> UnityEnvironment:
    return UnityEnvironment(f"sim:{scene}", base_port=0, seed=1, no_graphics=True)


class GymnasiumApi:
    """UnityToGymnasiumEnv, its reset and step brought to gym_unity's (observation; and
    observation, reward, done, info) for the shared cases."""
    name = "UnityToGymnasiumEnv"

    @staticmethod
    def make(scene: str, **options):
        return UnityToGymnasiumEnv(unity(scene), **options)

    @staticmethod
    def reset(env):
        return env.reset()[0]

    @staticmethod
    def step(env, action):
        observation, reward, terminated, truncated, info = env.step(action)
        return observation, reward, terminated or truncated, info


class GymApi:
    """gym_unity.envs.UnityToGymWrapper, as 0.28's users call it."""
    name = "gym_unity UnityToGymWrapper"

    @staticmethod
    def make(scene: str, **options):
        return gym_unity.envs.UnityToGymWrapper(unity(scene), **options)

    @staticmethod
    def reset(env):
        return env.reset()

    @staticmethod
    def step(env, action):
        return env.step(action)


def case(name: str, mirrors: str):
    """Runs the decorated case once per API, reporting an exception as its failure."""

    def run(function):
        for api in (GymApi, GymnasiumApi):
            try:
                function(api)
            except Exception as error:  # noqa: BLE001 - reported as the failure
                check(False, f"{api.name}: {name} (mirrors {mirrors}): {type(error).__name__}: {error}")
        return function

    return run


@case("vector observations, discrete actions", "test_gym_wrapper")
def _(api):
    env = api.make("Basic")
    try:
        observation = api.reset(env)
        native = env.step(env.action_space.sample())
        observation_2, reward, done, info = api.step(env, env.action_space.sample())
        arity = 4 if api is GymApi else 5
        check(isinstance(observation, np.ndarray) and observation.shape == (20,) and len(native) == arity
              and isinstance(env.action_space, spaces.Discrete) and env.action_space.n == 3
              and isinstance(observation_2, np.ndarray) and isinstance(reward, float)
              and isinstance(done, bool) and "step" in info,
              f"{api.name}: test_gym_wrapper: reset gives an ndarray observation, step a {arity}-tuple "
              "(ndarray, float, bool..., dict with the step)")
    finally:
        env.close()


@case("branched discrete actions flattened", "test_branched_flatten")
def _(api):
    flat = api.make("Simple2DDiscrete", flatten_branched=True)
    try:
        lookup = flat._flattener.lookup_action
        api.reset(flat)
        _, reward, *_ = api.step(flat, 3)
        check(isinstance(flat.action_space, spaces.Discrete) and flat.action_space.n == 4
              and lookup(0) == [0, 0] and lookup(1) == [0, 1] and lookup(3) == [1, 1] and isinstance(reward, float),
              f"{api.name}: test_branched_flatten: branches [2, 2] flattened to {flat.action_space}, "
              f"0 -> {lookup(0)}, 3 -> {lookup(3)}; a flattened action steps the scene")
    finally:
        flat.close()
    branched = api.make("Simple2DDiscrete", flatten_branched=False)
    try:
        check(isinstance(branched.action_space, spaces.MultiDiscrete) and list(branched.action_space.nvec) == [2, 2],
              f"{api.name}: test_branched_flatten: unflattened, the action space is {branched.action_space}")
    finally:
        branched.close()


@case("one branch with and without flattening", "test_action_space")
def _(api):
    for flatten in (True, False):
        env = api.make("Simple1DDiscrete", flatten_branched=flatten)
        try:
            check(isinstance(env.action_space, spaces.Discrete) and env.action_space.n == 2,
                  f"{api.name}: test_action_space: one branch of 2 is Discrete(2) with flatten_branched={flatten}")
        finally:
            env.close()


@case("seeded action sampling", "test_action_space_seed")
def _(api):
    samples = []
    for _ in range(2):
        env = api.make("Simple2DDiscrete", flatten_branched=True, action_space_seed=1337)
        try:
            samples.append([int(env.action_space.sample()) for _ in range(20)])
        finally:
            env.close()
    check(samples[0] == samples[1],
          f"{api.name}: test_action_space_seed: action_space_seed=1337 samples the same actions twice {samples[0][:6]}...")


@case("one image", "test_gym_wrapper_visual")
def _(api):
    for uint8 in (False, True):
        env = api.make("SimpleVisualDiscrete", uint8_visual=uint8)
        try:
            observation = api.reset(env)
            observation_2, *_ = api.step(env, env.action_space.sample())
            dtype = np.uint8 if uint8 else np.float32
            top = 255 if uint8 else 1.0
            check(env.observation_space.shape == (20, 20, 3) and env.observation_space.dtype == dtype
                  and observation.dtype == dtype and observation_2.shape == (20, 20, 3)
                  and observation.min() >= 0 and observation.max() <= top and env.observation_space.contains(observation),
                  f"{api.name}: test_gym_wrapper_visual (uint8_visual={uint8}): a {env.observation_space.shape} "
                  f"{dtype.__name__} image in [0, {top}]")
            if api is GymApi:
                check(np.array_equal(env.render(), observation_2), f"{api.name}: render() gives the latest image")
        finally:
            env.close()


@case("images and a vector", "test_gym_wrapper_single_visual_and_vector / test_gym_wrapper_multi_visual_and_vector")
def _(api):
    for uint8 in (False, True):
        env = api.make("SimpleVisualVector", uint8_visual=uint8, allow_multiple_obs=True)
        try:
            observation = api.reset(env)
            observation_2, *_ = api.step(env, env.action_space.sample())
            shapes = [box.shape for box in env.observation_space.spaces]
            check(isinstance(env.observation_space, spaces.Tuple) and shapes == [(20, 20, 3), (20, 20, 3), (1,)]
                  and isinstance(observation, list) and [o.shape for o in observation_2] == shapes
                  and observation[0].dtype == (np.uint8 if uint8 else np.float32) and observation[2].dtype == np.float32,
                  f"{api.name}: test_gym_wrapper_multi_visual_and_vector (uint8_visual={uint8}, allow_multiple_obs): "
                  f"a list, the two images then the vector, {shapes}")
        finally:
            env.close()
        env = api.make("SimpleVisualVector", uint8_visual=uint8, allow_multiple_obs=False)
        try:
            observation = api.reset(env)
            check(env.observation_space.shape == (20, 20, 3) and isinstance(observation, np.ndarray)
                  and observation.shape == (20, 20, 3),
                  f"{api.name}: test_gym_wrapper_single_visual_and_vector (uint8_visual={uint8}, not "
                  "allow_multiple_obs): the first image only")
        finally:
            env.close()


@case("refused scenes", "test_gym_wrapper (the wrapper's exceptions)")
def _(api):
    for scene, message in (("3DBall", "one Agent"), ("Ghost1D", "one behavior")):
        try:
            api.make(scene).close()
            check(False, f"{api.name}: {scene} is refused")
        except UnityGymException as error:
            check(message in str(error) and gym_unity.envs.UnityGymException is UnityGymException,
                  f"{api.name}: {scene} is refused with UnityGymException: {error}")


finish()
