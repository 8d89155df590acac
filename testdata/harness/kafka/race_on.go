//go:build race

package kafka

const raceEnabled = true
