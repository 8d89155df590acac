package main

import "github.com/sluicehq/sluice/jobs/jobcli"

func init() { extraCommands = append(extraCommands, jobcli.CompactCommand) }
