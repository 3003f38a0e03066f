"""Fidelity of the stand-in scenes, measured with policies trained in Unity: the real ONNX
policies of ../shared/models/onnx, run by onnxruntime, play `mlagents-sim` through the real
mlagents_envs 0.28 client. Each must reach the mean episode return Unity's benchmark gives
(3DBall, 3DBallHard: 100; the bar is 95) over 24 episodes.

Vector observations are concatenated in order, as ML-Agents' exporters expect; the v3
`deterministic_continuous_actions` output is used where the model has it, else the v2
`continuous_actions` output; actions are clipped to [-1, 1] as Unity does.

Usage: python peer_fidelity.py PATH/TO/mlagents-sim MODELS_DIR [BASE_PORT]
"""
import sys

import numpy as np
import onnxruntime as ort
from mlagents_envs.base_env import ActionTuple
from mlagents_envs.environment import UnityEnvironment
from mlagents_envs.side_channel.stats_side_channel import StatsSideChannel

CASES = [("3DBall.onnx", "3DBall", 95.0), ("3DBall_old.onnx", "3DBall", 95.0), ("3DBallHard.onnx", "3DBallHard", 95.0)]
EPISODES = 24


def play(sim, model_path, scene, port):
    session = ort.InferenceSession(model_path)
    input_name = session.get_inputs()[0].name
    outputs = [o.name for o in session.get_outputs()]
    output = "deterministic_continuous_actions" if "deterministic_continuous_actions" in outputs else "continuous_actions"
    env = UnityEnvironment(file_name=sim, base_port=port, seed=1, no_graphics=True,
                           additional_args=["--scene", scene], side_channels=[StatsSideChannel()])
    try:
        env.reset()
        name = list(env.behavior_specs)[0]
        running, returns, steps = {}, [], 0
        while len(returns) < EPISODES and steps < 20000:
            decisions, terminals = env.get_steps(name)
            for i, agent in enumerate(terminals.agent_id):
                returns.append(running.pop(agent, 0.0) + terminals.reward[i])
            for i, agent in enumerate(decisions.agent_id):
                running[agent] = running.get(agent, 0.0) + decisions.reward[i]
            if len(decisions):
                obs = np.concatenate([o.reshape(len(decisions), -1) for o in decisions.obs], axis=1)
                actions = session.run([output], {input_name: obs.astype(np.float32)})[0]
                env.set_actions(name, ActionTuple(continuous=np.clip(actions, -1, 1).astype(np.float32)))
            env.step()
            steps += 1
        return returns[:EPISODES]
    finally:
        env.close()


def main():
    sim, models = sys.argv[1], sys.argv[2]
    port = int(sys.argv[3]) if len(sys.argv) > 3 else 6205
    passed = failed = 0
    for k, (model, scene, bar) in enumerate(CASES):
        returns = play(sim, f"{models}/{model}", scene, port + k)
        mean = float(np.mean(returns)) if returns else float("nan")
        ok = len(returns) == EPISODES and mean >= bar
        passed += ok
        failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {model} on sim:{scene}: mean return {mean:.2f} over {len(returns)} episodes "
              f"(min {min(returns, default=float('nan')):.2f}; bar {bar})", flush=True)
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
