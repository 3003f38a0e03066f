"""Differential test of our mlagents_envs drop-in against the real mlagents_envs 0.28.0.

The same script runs twice, once in each venv (both packages are imported as
`mlagents_envs`): `record` drives stand-in scenes with a fixed seed and a recorded action
sequence, with the engine configuration, environment parameters and stats channels and a
user-defined SideChannel subclass (the stand-ins echo its messages), and writes every field of
every DecisionSteps/TerminalSteps, the specs, the side-channel payloads and the exception
classes of four faults to an .npz file; `compare` then checks the two files: every array of
the same dtype and shape and bit for bit equal.

Known difference, reported but not a failure: 0.28 gives `group_id` as a Python list when a
batch has agents (an int64 array once stored), the drop-in an int32 array; the values must
still be equal.

Usage: python dropin_oracle.py record PATH/TO/mlagents-sim OUT.npz BASE_PORT
       python dropin_oracle.py compare REAL.npz OURS.npz
"""
import sys
import uuid

import numpy as np

# (scene, steps): a vector scene, a camera scene (PNG), hybrid actions, a grouped scene,
# two behaviors, masked discrete actions, variable-length entities.
SCENES = [
    ("3DBall", 120),
    ("GridWorld", 25),
    ("SimpleHybrid2x2", 60),
    ("CoopReach1D", 60),
    ("Ghost1D", 60),
    ("CoopSacrifice", 60),
    ("EntityGoal1D", 40),
    ("SimpleVisualHybrid", 30),
]
# The stand-ins send back every raw message received on this channel.
ECHO_CHANNEL_ID = uuid.UUID("3f07b5c2-8a5e-4d7e-9c36-2f1e5d0a9b71")


def record(sim, out, base_port):
    from mlagents_envs.base_env import ActionTuple
    from mlagents_envs.environment import UnityEnvironment
    from mlagents_envs.side_channel import IncomingMessage, OutgoingMessage, SideChannel
    from mlagents_envs.side_channel.engine_configuration_channel import EngineConfigurationChannel
    from mlagents_envs.side_channel.environment_parameters_channel import EnvironmentParametersChannel
    from mlagents_envs.side_channel.stats_side_channel import StatsSideChannel

    class EchoChannel(SideChannel):
        """A user subclass: sends a string and a float list each step, keeps what comes back."""

        def __init__(self):
            super().__init__(ECHO_CHANNEL_ID)
            self.received = []

        def on_message_received(self, msg: IncomingMessage) -> None:
            self.received.append((msg.read_string(), msg.read_float32_list()))

        def send(self, text, values):
            msg = OutgoingMessage()
            msg.write_string(text)
            msg.write_float32_list(values)
            super().queue_message_to_send(msg)

    data = {}
    for index, (scene, steps) in enumerate(SCENES):
        engine, params, stats, echo = EngineConfigurationChannel(), EnvironmentParametersChannel(), StatsSideChannel(), EchoChannel()
        env = UnityEnvironment(
            sim,
            base_port=base_port + index,
            seed=7,
            no_graphics=True,
            additional_args=["--scene", scene],
            side_channels=[engine, params, stats, echo],
            timeout_wait=60,
        )
        engine.set_configuration_parameters(time_scale=20.0, width=84, height=84)
        params.set_float_parameter("oracle", 1.5)
        params.set_uniform_sampler_parameters("oracle_uniform", 0.0, 2.0, seed=3)
        env.reset()
        data[f"{scene}/specs"] = np.array(repr(sorted(env.behavior_specs.items())))
        rng = np.random.default_rng(index)
        for step in range(steps):
            for name in sorted(env.behavior_specs):
                spec = env.behavior_specs[name]
                decisions, terminals = env.get_steps(name)
                key = f"{scene}/{step}/{name}"
                for kind, batch in (("decision", decisions), ("terminal", terminals)):
                    for i, obs in enumerate(batch.obs):
                        data[f"{key}/{kind}/obs{i}"] = obs
                    for field in ("reward", "agent_id", "group_reward"):
                        data[f"{key}/{kind}/{field}"] = getattr(batch, field)
                    data[f"{key}/{kind}/group_id"] = np.asarray(batch.group_id)
                    data[f"{key}/{kind}/len"] = np.array(len(batch))
                data[f"{key}/terminal/interrupted"] = terminals.interrupted
                masks = decisions.action_mask
                data[f"{key}/decision/mask_is_none"] = np.array(masks is None)
                for b, mask in enumerate(masks or []):
                    data[f"{key}/decision/mask{b}"] = mask
                n = len(decisions)
                continuous = rng.uniform(-1, 1, (n, spec.action_spec.continuous_size)).astype(np.float32)
                discrete = np.zeros((n, spec.action_spec.discrete_size), dtype=np.int32)
                for b, size in enumerate(spec.action_spec.discrete_branches):
                    for agent in range(n):
                        allowed = [a for a in range(size) if masks is None or not masks[b][agent, a]]
                        discrete[agent, b] = allowed[rng.integers(len(allowed))] if allowed else 0
                env.set_actions(name, ActionTuple(continuous=continuous, discrete=discrete))
            echo.send(f"step {step}", [float(step), -0.5])
            env.step()
        data[f"{scene}/echo"] = np.array(repr(echo.received))
        data[f"{scene}/stats"] = np.array(repr(sorted((k, [(v, m.name) for v, m in vs]) for k, vs in stats.get_and_reset_stats().items())))
        env.close()
    data.update(faults(sim, base_port + len(SCENES)))
    np.savez(out, **data)
    print(f"recorded {len(data)} arrays from {len(SCENES)} scenes to {out}")


def faults(sim, port):
    """The exception class (module and name) each fault raises."""
    from mlagents_envs.base_env import ActionTuple
    from mlagents_envs.environment import UnityEnvironment

    def raised(action):
        try:
            action()
        except Exception as error:  # noqa: BLE001 - the class is what is compared
            return f"{type(error).__module__}.{type(error).__name__}"
        return "nothing raised"

    def stepping(fault, timeout_wait, port):
        def run():
            env = UnityEnvironment(sim, base_port=port, no_graphics=True, timeout_wait=timeout_wait,
                                   additional_args=["--scene", "3DBall", "--fault", fault])
            try:
                for _ in range(10):
                    env.step()
            finally:
                try:
                    env.close()
                except Exception:  # noqa: BLE001 - closing a dead environment may raise too
                    pass
        return run

    def wrong_shape():
        env = UnityEnvironment(sim, base_port=port + 3, no_graphics=True, additional_args=["--scene", "3DBall"])
        try:
            env.reset()
            name = next(iter(env.behavior_specs))
            env.set_actions(name, ActionTuple(continuous=np.zeros((3, 2), dtype=np.float32)))
        finally:
            env.close()

    return {
        "fault/bad_path": np.array(raised(lambda: UnityEnvironment("/nonexistent/player", base_port=port))),
        "fault/player_exit": np.array(raised(stepping("exit@3", 30, port + 1))),
        "fault/timeout": np.array(raised(stepping("hang@3", 3, port + 2))),
        "fault/wrong_action_shape": np.array(raised(wrong_shape)),
    }


def compare(real_path, ours_path):
    real, ours = np.load(real_path), np.load(ours_path)
    failures, known, compared = [], 0, 0
    for key in sorted(set(real.files) - set(ours.files)):
        failures.append(f"{key}: only in the real client's recording")
    for key in sorted(set(ours.files) - set(real.files)):
        failures.append(f"{key}: only in the drop-in's recording")
    for key in sorted(set(real.files) & set(ours.files)):
        a, b = real[key], ours[key]
        compared += 1
        if key.endswith("/group_id") and a.dtype != b.dtype:
            known += 1
            if a.shape != b.shape or not np.array_equal(a.astype(np.int64), b.astype(np.int64)):
                failures.append(f"{key}: group ids differ: {a} against {b}")
            continue
        if a.dtype != b.dtype or a.shape != b.shape:
            failures.append(f"{key}: {a.dtype}{a.shape} in the real client, {b.dtype}{b.shape} in the drop-in")
        elif a.tobytes() != b.tobytes():
            failures.append(f"{key}: values differ: {a.ravel()[:6]} against {b.ravel()[:6]}")
    faults = {key: str(real[key]) for key in real.files if key.startswith("fault/")}
    print(f"compared {compared} arrays; group_id list (0.28) against int32 array (drop-in): {known} batches; fault classes: {faults}")
    for failure in failures[:30]:
        print("FAIL", failure)
    if failures:
        print(f"{len(failures)} differences")
        sys.exit(1)
    print("identical")


if __name__ == "__main__":
    if sys.argv[1] == "record":
        record(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif sys.argv[1] == "compare":
        compare(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
