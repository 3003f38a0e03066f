"""The ``mlagents_envs`` loggers and their level."""

import logging

CRITICAL = logging.CRITICAL
FATAL = logging.FATAL
ERROR = logging.ERROR
WARNING = logging.WARNING
INFO = logging.INFO
DEBUG = logging.DEBUG

_log_level = INFO
_loggers = set()


def get_logger(name: str) -> logging.Logger:
    """A logger that follows :func:`set_log_level`."""
    logger = logging.getLogger(name=name)
    logger.setLevel(_log_level)
    _loggers.add(logger)
    return logger


def set_log_level(log_level: int) -> None:
    """Sets the level of every logger made by :func:`get_logger`."""
    global _log_level
    _log_level = log_level
    for logger in _loggers:
        logger.setLevel(log_level)
