package routing

import "math/bits"

// Odd 64-bit constants: multiplying by an odd number is a bijection, so no
// round of the hash loses information.
const (
	prime1 = 0x9e3779b97f4a7c15 // 2^64 / golden ratio
	prime2 = 0xc2b2ae3d27d4eb4f
)

// mix64 is Stafford's Mix13, the finalizer of splitmix64. It is a bijection
// in which every input bit flips every output bit with probability close to
// 1/2, so keys that differ only in their last digits land far apart.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// hashString hashes s eight bytes at a time and finishes with mix64. Each
// round is a bijection of the state for a fixed word, so two strings of the
// same length that differ in one word never collide, and the finalizer
// spreads keys with long common prefixes (customer_id=9527) evenly.
func hashString(s string) uint64 {
	h := uint64(len(s)) * prime1
	for ; len(s) >= 8; s = s[8:] {
		h = round(h, le64(s))
	}
	if len(s) > 0 {
		h = round(h, tail64(s))
	}
	return mix64(h)
}

func round(h, word uint64) uint64 {
	return bits.RotateLeft64(h^(word*prime2), 31) * prime1
}

// le64 reads the first eight bytes of s as a little-endian word; the
// compiler turns it into one load.
func le64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// tail64 packs the last 1–7 bytes; the length already in the state tells
// "ab" from "ab\x00".
func tail64(s string) uint64 {
	var w uint64
	for i := len(s) - 1; i >= 0; i-- {
		w = w<<8 | uint64(s[i])
	}
	return w
}

// bounded maps a uniform 64-bit value onto [0, n) with one multiplication
// (Lemire's method) instead of a division; its bias is below n/2^64.
func bounded(x uint64, n int) int {
	hi, _ := bits.Mul64(x, uint64(n))
	return int(hi)
}

// slotHash is the rendezvous seed of ring slot s: the splitmix64 sequence,
// so neighbouring slots get unrelated seeds.
func slotHash(s int) uint64 {
	return mix64(uint64(s+1) * prime1)
}

// score is an agent's rendezvous score for a slot; the agent with the
// highest score owns the slot. Mixing after the XOR makes the ranking of
// agents independent from one slot to the next.
func score(slotSeed, agentSeed uint64) uint64 {
	return mix64(slotSeed ^ agentSeed)
}
