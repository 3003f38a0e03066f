"""The exceptions of ``mlagents_envs`` 0.28 (all derive from :class:`UnityException`)."""


class UnityException(Exception):
    """Any error related to ml-agents environment."""


class UnityEnvironmentException(UnityException):
    """The environment cannot be started, has died, or was used after close."""


class UnityCommunicationException(UnityException):
    """A problem with the communication with Unity."""


class UnityCommunicatorStoppedException(UnityException):
    """Unity closed the connection."""


class UnityObservationException(UnityException):
    """Observations that do not match the behavior spec."""


class UnityActionException(UnityException):
    """Actions of the wrong shape, or for an unknown behavior."""


class UnityTimeOutException(UnityException):
    """Unity did not answer within ``timeout_wait`` seconds."""


class UnitySideChannelException(UnityException):
    """A side channel was used wrongly."""


class UnityWorkerInUseException(UnityException):
    """The port of this worker is taken by another process."""

    MESSAGE_TEMPLATE = (
        "Couldn't start socket communication because worker number {} is still in use. "
        "You may need to manually close a previously opened environment "
        "or use a different worker number."
    )

    def __init__(self, worker_id):
        message = self.MESSAGE_TEMPLATE.format(str(worker_id))
        super().__init__(message)


class UnityPolicyException(UnityException):
    """A problem with the policy (used by trainers, not raised here)."""
