package nodestatus

import (
	"strings"
	"testing"
)

func TestArenaKeepsWhatCameBeforeTheRuntimeAndReleasesCalls(t *testing.T) {
	a := newBumpArena(1024)
	const base = 0x1003 // an odd address: alignment is of addresses
	state, moved := a.realloc(noAlloc, 0, 8, 100, base)
	if moved || (base+state)%8 != 0 {
		t.Fatalf("the adapter's state at %d", state)
	}
	a.start()
	node, _ := a.realloc(noAlloc, 0, 1, 300, base)
	if node < state+100 {
		t.Fatalf("the node at %d overlaps the state", node)
	}
	// Grown in place while it is the latest.
	if grown, moved := a.realloc(node, 300, 1, 400, base); grown != node || moved {
		t.Errorf("grown to %d (moved %v)", grown, moved)
	}
	a.realloc(noAlloc, 0, 4, 10, base) // another: the node is no longer the latest
	if moved2, moved := a.realloc(node, 400, 1, 500, base); moved2 == node || !moved {
		t.Errorf("not the latest: moved to %d (%v)", moved2, moved)
	}
	a.release()
	again, _ := a.realloc(noAlloc, 0, 1, 300, base)
	if again != node {
		t.Errorf("after the call the next node is at %d, want %d (the call's memory released)", again, node)
	}
	if a.forever != state+100 {
		t.Errorf("forever %d", a.forever)
	}
}

func TestArenaSaysWhenItIsFull(t *testing.T) {
	a := newBumpArena(64)
	a.start()
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "the host passed 100 bytes, more than the SDK's 64-byte arena holds") {
			t.Errorf("%v", r)
		}
	}()
	a.realloc(noAlloc, 0, 1, 100, 0)
}

func TestArenaServesPassAfterPassInOneInstance(t *testing.T) {
	a := newBumpArena(4 << 20)
	a.realloc(noAlloc, 0, 8, 4096, 0)
	a.start()
	for i := 0; i < 10000; i++ {
		a.realloc(noAlloc, 0, 1, 15000, 0) // the node
		a.realloc(noAlloc, 0, 4, 68, 0)    // a host function's result
		a.release()
	}
	if a.top != 4096 {
		t.Errorf("top %d after the calls", a.top)
	}
}
