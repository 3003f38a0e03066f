"""Unit tests of the mlagents_envs drop-in's pure-Python surface, the cases of upstream's
`ml-agents-envs/mlagents_envs/tests/test_side_channel.py`, `test_steps.py` and
`test_timers.py` (0.28-era copies), written anew against the public API (the upstream files
are not in any wheel and may not be copied). Each test names the upstream test it mirrors.

Runs in the drop-in's venv, or in the real client's (the same cases must pass on both):
Usage: python dropin_units.py
"""
import struct
import sys
import uuid

import numpy as np
from mlagents_envs.base_env import (
    ActionSpec,
    ActionTuple,
    BehaviorSpec,
    DecisionSteps,
    DimensionProperty,
    ObservationSpec,
    ObservationType,
    TerminalSteps,
)
from mlagents_envs.exception import UnityEnvironmentException, UnitySideChannelException
from mlagents_envs.side_channel import IncomingMessage, OutgoingMessage, SideChannel
from mlagents_envs.side_channel.engine_configuration_channel import EngineConfig, EngineConfigurationChannel
from mlagents_envs.side_channel.environment_parameters_channel import EnvironmentParametersChannel
from mlagents_envs.side_channel.float_properties_channel import FloatPropertiesChannel
from mlagents_envs.side_channel.raw_bytes_channel import RawBytesChannel
from mlagents_envs.side_channel.side_channel_manager import SideChannelManager
from mlagents_envs.side_channel.stats_side_channel import StatsAggregationMethod, StatsSideChannel
from mlagents_envs import timers

TESTS = []


def test(function):
    TESTS.append(function)
    return function


class IntChannel(SideChannel):
    """A user subclass that sends and receives one int32 per message."""

    def __init__(self):
        self.list_int = []
        super().__init__(uuid.UUID("2f487771-440f-4ffc-afd9-486650eb5b7b"))

    def send_int(self, value):
        msg = OutgoingMessage()
        msg.write_int32(value)
        super().queue_message_to_send(msg)

    def on_message_received(self, msg):
        self.list_int.append(msg.read_int32())


@test
def int_channel():  # test_side_channel.py::test_int_channel
    sender, receiver = IntChannel(), IntChannel()
    sender.send_int(5)
    sender.send_int(6)
    data = SideChannelManager([sender]).generate_side_channel_messages()
    SideChannelManager([receiver]).process_side_channel_message(data)
    assert receiver.list_int == [5, 6]
    assert sender.message_queue == []


@test
def float_properties():  # test_side_channel.py::test_float_properties
    sender, receiver = FloatPropertiesChannel(), FloatPropertiesChannel()
    sender.set_property("prop1", 1.0)
    data = SideChannelManager([sender]).generate_side_channel_messages()
    SideChannelManager([receiver]).process_side_channel_message(data)
    assert receiver.get_property("prop1") == 1.0 and receiver.get_property("prop2") is None
    sender.set_property("prop2", 2.0)
    data = SideChannelManager([sender]).generate_side_channel_messages()
    SideChannelManager([receiver]).process_side_channel_message(data)
    assert receiver.get_property("prop2") == 2.0 and len(receiver.list_properties()) == 2
    assert receiver.get_property_dict_copy() == {"prop1": 1.0, "prop2": 2.0}


@test
def raw_bytes():  # test_side_channel.py::test_raw_bytes
    guid = uuid.uuid4()
    sender, receiver = RawBytesChannel(guid), RawBytesChannel(guid)
    sender.send_raw_data(b"foo")
    sender.send_raw_data(b"bar")
    SideChannelManager([receiver]).process_side_channel_message(SideChannelManager([sender]).generate_side_channel_messages())
    assert receiver.get_and_clear_received_messages() == [b"foo", b"bar"]
    assert receiver.get_and_clear_received_messages() == []


@test
def message_bool():  # test_side_channel.py::test_message_bool
    msg_out = OutgoingMessage()
    for value in [True, False, True]:
        msg_out.write_bool(value)
    msg_in = IncomingMessage(msg_out.buffer)
    assert [msg_in.read_bool() for _ in range(3)] == [True, False, True]
    assert msg_in.read_bool() is False and msg_in.read_bool(default_value=True) is True


@test
def message_int32():  # test_side_channel.py::test_message_int32
    msg_out = OutgoingMessage()
    msg_out.write_int32(1337)
    msg_in = IncomingMessage(msg_out.buffer)
    assert msg_in.read_int32() == 1337 and msg_in.read_int32() == 0 and msg_in.read_int32(default_value=42) == 42


@test
def message_float32():  # test_side_channel.py::test_message_float32
    msg_out = OutgoingMessage()
    msg_out.write_float32(3.14)
    msg_in = IncomingMessage(msg_out.buffer)
    assert abs(msg_in.read_float32() - 3.14) < 1e-6
    assert msg_in.read_float32() == 0.0 and msg_in.read_float32(default_value=0.5) == 0.5


@test
def message_string():  # test_side_channel.py::test_message_string
    msg_out = OutgoingMessage()
    msg_out.write_string("hello world")
    msg_in = IncomingMessage(msg_out.buffer)
    assert msg_in.read_string() == "hello world"
    assert msg_in.read_string() == "" and msg_in.read_string(default_value="x") == "x"


@test
def message_float_list():  # test_side_channel.py::test_message_float_list
    msg_out = OutgoingMessage()
    msg_out.write_float32_list([1.0, 3.0, 3.0])
    msg_in = IncomingMessage(msg_out.buffer)
    assert msg_in.read_float32_list() == [1.0, 3.0, 3.0]
    assert msg_in.read_float32_list() == [] and msg_in.read_float32_list(default_value=[1.0]) == [1.0]


@test
def engine_configuration():  # test_side_channel.py::test_engine_configuration
    sender = EngineConfigurationChannel()
    sender.set_configuration_parameters(quality_level=1)
    data = SideChannelManager([sender]).generate_side_channel_messages()
    # One record: the channel id, the length 8, the type QUALITY_LEVEL (1), the level 1.
    assert data[:16] == uuid.UUID("e951342c-4f7e-11ea-b238-784f4387d1f7").bytes_le
    assert struct.unpack_from("<iii", data, 16) == (8, 1, 1)
    sender.set_configuration(EngineConfig.default_config())
    data = SideChannelManager([sender]).generate_side_channel_messages()
    # Screen resolution (two ints), quality, time scale, target and capture frame rates.
    assert data.count(sender.channel_id.bytes_le) == 5
    try:
        sender.set_configuration_parameters(width=None, height=42)
        raise AssertionError("width without height was accepted")
    except UnitySideChannelException:
        pass
    try:
        sender.on_message_received(IncomingMessage(b""))
        raise AssertionError("the engine channel accepted a message from Unity")
    except Exception as error:  # noqa: BLE001
        assert type(error).__name__ == "UnityCommunicationException"


@test
def environment_parameters():  # test_side_channel.py::test_environment_parameters
    sender = EnvironmentParametersChannel()
    sender.set_float_parameter("param-1", 0.1)
    sender.set_uniform_sampler_parameters("param-2", 1.0, 2.0, 3)
    data = SideChannelManager([sender]).generate_side_channel_messages()
    records = []
    offset = 0
    while offset < len(data):
        (length,) = struct.unpack_from("<i", data, offset + 16)
        records.append(IncomingMessage(bytes(data[offset + 20 : offset + 20 + length])))
        offset += 20 + length
    first, second = records
    assert (first.read_string(), first.read_int32()) == ("param-1", 0) and abs(first.read_float32() - 0.1) < 1e-7
    assert (second.read_string(), second.read_int32(), second.read_int32(), second.read_int32()) == ("param-2", 1, 3, 0)
    assert (second.read_float32(), second.read_float32()) == (1.0, 2.0)


@test
def stats_channel():  # test_side_channel.py::test_stats_channel
    receiver = StatsSideChannel()
    msg = OutgoingMessage()
    msg.write_string("stats-1")
    msg.write_float32(42.0)
    msg.write_int32(1)  # MOST_RECENT
    receiver.on_message_received(IncomingMessage(msg.buffer))
    stats = receiver.get_and_reset_stats()
    assert list(stats) == ["stats-1"] and stats["stats-1"] == [(42.0, StatsAggregationMethod.MOST_RECENT)]
    assert receiver.get_and_reset_stats() == {}


@test
def duplicate_channel_ids():  # test_side_channel.py (duplicate ids raise)
    try:
        SideChannelManager([IntChannel(), IntChannel()])
        raise AssertionError("two channels with one id were accepted")
    except UnityEnvironmentException:
        pass


@test
def short_message():  # side_channel_manager: a record shorter than its length raises
    data = uuid.uuid4().bytes_le + struct.pack("<i", 10) + b"abc"
    try:
        SideChannelManager([]).process_side_channel_message(data)
        raise AssertionError("a short record was accepted")
    except UnityEnvironmentException:
        pass


def observation_specs(*shapes):
    return [ObservationSpec(shape, (DimensionProperty.UNSPECIFIED,) * len(shape), ObservationType.DEFAULT, f"obs{i}")
            for i, shape in enumerate(shapes)]


@test
def decision_steps():  # test_steps.py::test_decision_steps
    ds = DecisionSteps(
        obs=[np.array(range(12), dtype=np.float32).reshape(3, 4)],
        reward=np.array(range(3), dtype=np.float32),
        agent_id=np.array(range(10, 13), dtype=np.int32),
        action_mask=[np.zeros((3, 4), dtype=bool)],
        group_id=np.array(range(3), dtype=np.int32),
        group_reward=np.array(range(3), dtype=np.float32),
    )
    assert ds.agent_id_to_index[10] == 0 and ds.agent_id_to_index[11] == 1 and ds.agent_id_to_index[12] == 2
    assert len(ds) == 3 and list(ds) == [10, 11, 12]
    step = ds[12]
    assert step.obs[0].tolist() == [8, 9, 10, 11] and step.reward == 2 and step.agent_id == 12
    assert step.action_mask[0].tolist() == [False] * 4 and step.group_id == 2 and step.group_reward == 2
    try:
        ds[-1]
        raise AssertionError("an absent agent id was found")
    except KeyError:
        pass


@test
def empty_decision_steps():  # test_steps.py::test_empty_decision_steps
    spec = BehaviorSpec(observation_specs(( 3, 2), (5,)), ActionSpec.create_continuous(3))
    ds = DecisionSteps.empty(spec)
    assert len(ds.obs) == 2 and ds.obs[0].shape == (0, 3, 2) and ds.obs[1].shape == (0, 5)
    assert ds.action_mask is None and len(ds) == 0


@test
def terminal_steps():  # test_steps.py::test_terminal_steps
    ts = TerminalSteps(
        obs=[np.array(range(12), dtype=np.float32).reshape(3, 4)],
        reward=np.array(range(3), dtype=np.float32),
        interrupted=np.array([True, False, True], dtype=bool),
        agent_id=np.array(range(10, 13), dtype=np.int32),
        group_id=np.array(range(3), dtype=np.int32),
        group_reward=np.array(range(3), dtype=np.float32),
    )
    step = ts[12]
    assert step.obs[0].tolist() == [8, 9, 10, 11] and step.reward == 2 and step.interrupted and step.agent_id == 12
    assert list(ts) == [10, 11, 12]


@test
def empty_terminal_steps():  # test_steps.py::test_empty_terminal_steps
    spec = BehaviorSpec(observation_specs((3, 2), (5,)), ActionSpec.create_continuous(3))
    ts = TerminalSteps.empty(spec)
    assert ts.obs[0].shape == (0, 3, 2) and ts.obs[1].shape == (0, 5) and ts.interrupted.shape == (0,)


@test
def action_generator():  # test_steps.py::test_specs / test_action_generator
    spec = ActionSpec.create_continuous(3)
    zero = spec.empty_action(4)
    assert zero.continuous.shape == (4, 3) and zero.continuous.dtype == np.float32 and zero.discrete.shape == (4, 0)
    random = spec.random_action(4)
    assert random.continuous.shape == (4, 3) and np.all(np.abs(random.continuous) <= 1)
    spec = ActionSpec.create_discrete((3, 4, 5))
    random = spec.random_action(10)
    assert random.discrete.shape == (10, 3) and random.discrete.dtype == np.int32
    for branch, size in enumerate((3, 4, 5)):
        assert np.all(random.discrete[:, branch] < size) and np.all(random.discrete[:, branch] >= 0)
    assert spec.is_discrete() and not spec.is_continuous() and spec.discrete_size == 3
    assert ActionSpec(2, ()) == ActionSpec.create_continuous(2)


@test
def action_tuple():  # test_steps.py (ActionTuple casts and fills the other part)
    actions = ActionTuple(continuous=np.zeros((2, 3), dtype=np.float64))
    assert actions.continuous.dtype == np.float32 and actions.discrete.shape == (2, 0) and actions.discrete.dtype == np.int32
    actions = ActionTuple(discrete=np.ones((2, 1), dtype=np.int64))
    assert actions.discrete.dtype == np.int32 and actions.continuous.shape == (2, 0)


@test
def timers_tree():  # test_timers.py::test_timers
    timers.reset_timers()

    @timers.timed
    def decorated():
        with timers.hierarchical_timer("inner"):
            pass

    with timers.hierarchical_timer("outer"):
        for _ in range(3):
            decorated()
    timers.set_gauge("my_gauge", 4.0)
    timers.set_gauge("my_gauge", 1.0)
    tree = timers.get_timer_tree()
    outer = tree["children"]["outer"]
    assert tree["name"] == "root" and outer["count"] == 1
    child = outer["children"]["timers_tree.<locals>.decorated"]
    assert child["count"] == 3 and child["children"]["inner"]["count"] == 3
    gauge = tree["gauges"]["my_gauge"]
    assert (gauge["value"], gauge["min"], gauge["max"], gauge["count"]) == (1.0, 1.0, 4.0, 2)


def main():
    failed = 0
    for function in TESTS:
        try:
            function()
            print(f"ok   {function.__name__}")
        except Exception as error:  # noqa: BLE001 - every case reports
            failed += 1
            print(f"FAIL {function.__name__}: {type(error).__name__}: {error}")
    print(f"{len(TESTS) - failed} passed, {failed} failed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
