//go:build wasip1

// memory.size and memory.grow, for the pages of the receive arena (memory_wasip1.go).

#include "textflag.h"

TEXT ·memorySize(SB), NOSPLIT, $0
	Get SP
	CurrentMemory
	I32Store ret+0(FP)
	RET

TEXT ·memoryGrow(SB), NOSPLIT, $0
	Get SP
	I32Load pages+0(FP)
	GrowMemory
	I32Store ret+8(FP)
	RET
