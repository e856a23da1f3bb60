"""Stage 5, execute: the driver. Takes `CompareOptions`, collects, plans units of work (one graph's tokens of one
rank), runs them on a `UnitExecutor` (local worker processes here, Ray nodes from cluster/) through the one driver
(driver.py), which streams each unit's rendered rows into the report writers as they finish, and gives the
`CompareResult`."""
