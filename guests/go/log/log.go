// Package log writes structured lines into the host's log; the host tags every line with the
// controller and the key being reconciled.
//
//	log.Info("created pod", "pod", name, "replicas", 3)
//
// Arguments after the message alternate between keys and values, as with log/slog; values are
// formatted with fmt.Sprint, and a value without a key is logged under "!BADKEY".
package log

import (
	"fmt"

	"kubewasm.dev/guest/internal/wit"
)

// Level is the severity of a log line.
type Level uint8

// The levels, in the order of the WIT enum `level`.
const (
	LevelTrace Level = iota
	LevelDebug
	LevelInfo
	LevelWarn
	LevelError
)

// Log writes one line at level with key/value pairs.
func Log(level Level, message string, keysAndValues ...any) {
	wit.Log(uint8(level), message, fields(keysAndValues...))
}

// fields pairs up alternating keys and values as Log does.
func fields(keysAndValues ...any) []wit.Field {
	pairs := make([]wit.Field, 0, (len(keysAndValues)+1)/2)
	for i := 0; i < len(keysAndValues); i += 2 {
		if i+1 == len(keysAndValues) {
			pairs = append(pairs, wit.Field{Key: "!BADKEY", Value: fmt.Sprint(keysAndValues[i])})
			break
		}
		pairs = append(pairs, wit.Field{Key: fmt.Sprint(keysAndValues[i]), Value: fmt.Sprint(keysAndValues[i+1])})
	}
	return pairs
}

// Trace writes one line at LevelTrace.
func Trace(message string, keysAndValues ...any) { Log(LevelTrace, message, keysAndValues...) }

// Debug writes one line at LevelDebug.
func Debug(message string, keysAndValues ...any) { Log(LevelDebug, message, keysAndValues...) }

// Info writes one line at LevelInfo.
func Info(message string, keysAndValues ...any) { Log(LevelInfo, message, keysAndValues...) }

// Warn writes one line at LevelWarn.
func Warn(message string, keysAndValues ...any) { Log(LevelWarn, message, keysAndValues...) }

// Error writes one line at LevelError.
func Error(message string, keysAndValues ...any) { Log(LevelError, message, keysAndValues...) }
