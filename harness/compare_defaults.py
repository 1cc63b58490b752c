"""``compare``'s measurement defaults, in one place for ``CompareSettings`` and the CLI (which must not
import torch to print its help): the offline stopping rule and the server mode's arrivals."""

CI_TARGET = 0.01  # offline: stop when every median's relative 95 % CI half-width is under this
MIN_ROUNDS = 5  # offline: rounds before the CI rule may stop
MAX_ROUNDS = 200  # offline: hard cap on rounds
BUDGET_S = 5.0  # offline: time budget per shape and group, seconds
QPS = 200.0  # server: mean arrival rate, calls per second
SERVER_CALLS = 50  # server: calls per method and layout
