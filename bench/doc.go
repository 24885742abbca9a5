// Package bench holds Switchyard's performance benchmarks. Each prints its
// figure as a ratio against a named baseline measured in the same run on the
// same machine, so the numbers mean something on any hardware:
//
//	make bench
//
// They are benchmarks, not tests: nothing here fails on a slow machine.
package bench
