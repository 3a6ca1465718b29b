// Package faultfs is a test-only file system layer for broker/log that
// makes a machine crash reproducible and injects disk faults into a broker
// process. A broker uses it only when STRATA_FAULTFS=1 (EnvVar); otherwise
// its logs write to the operating system directly and pay nothing.
//
// # Power loss
//
// Every write goes to the operating system as without the layer. Besides,
// the layer keeps a journal (<dataDir>/.faultfs/journal, one record a line,
// each appended with one write(2), so a SIGKILL leaves it consistent) of
// what is durable under the data directory:
//
//   - a file's durable size is its size when its last fsync began (bytes
//     written while the fsync ran may have missed it);
//   - a file or directory created by the broker exists durably only once
//     its directory was fsynced after the creation; a rename likewise
//     (until then the renamed file keeps its directory entry only if the
//     target name had a durable one: the outcome where the rename reached
//     the disk);
//   - shrinking truncations and removals count as durable at once (one
//     legal outcome of a crash);
//   - what existed when the layer first met it counts as durable, and a
//     journal left by an earlier process (killed without DropUnsynced) is
//     kept: its unsynced tails stay undurable until synced.
//
// DropUnsynced, called by a harness after it SIGKILLed the broker and
// before it starts it again, puts every tracked file back to its durable
// state: files are truncated to their durable size, entries whose creation
// was never made durable are removed (with everything under them). That is
// a power loss with a volatile page cache, at its worst for the unsynced
// data (torn writes inside a synced region are broker/log's own tests'
// business, see powerloss_test.go). Files the broker writes without
// broker/log (pointer index, HWM checkpoint, group offsets) are not
// tracked and survive whole.
//
// # Disk faults
//
// SetFault(dataDir, mode) writes <dataDir>/.faultfs/fault; the broker's
// layer reads it every 20 ms. With NoSpace, writes, file and directory
// creations, renames and fsyncs fail with ENOSPC (removals and shrinking
// truncations still work, as on a full disk); with IOError they fail with
// EIO, and so do removals and truncations. Reads are never failed. None
// clears the fault.
package faultfs
