#!/bin/bash
# Invalid arguments: loomInvalidArgument with a message, nothing lost.
. "$(dirname "$0")/lib.sh"
FT="$TESTBIN/ranks/fault_test"
for n in 1 3; do
  run_ranks $n 60 "$FT" --bad-input
  expect_count "bad input handled, communicator intact" $n "bad input on $n ranks"
  expect_count "-> invalid argument:" $((n * 18)) "18 invalid calls rejected with a message on each of $n ranks"
done
check_no_leftovers fault_test
finish
