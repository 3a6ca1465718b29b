// Package childproc starts the subprocesses Strata runs beside itself (the
// Versity Gateway of `strata dev`, `strata chaos` and the tests; the broker
// processes of `strata chaos` and of tests; the `strata dev` of `strata
// bench`) so that they die with their parent, even when the parent is
// SIGKILLed or panics out of a test timeout and runs no cleanup.
//
// On Linux the kernel does it: the child is started with
// SysProcAttr.Pdeathsig, the signal it gets when its parent goes away.
// "Parent" there is the OS thread that forked it, not the process: if that
// thread exits (Go ends the thread of a goroutine that exits while locked
// to it with runtime.LockOSThread), the child is signalled although its
// parent process lives on. Start therefore forks from a goroutine locked
// to its own thread, which then waits for the child and stays locked (and
// so keeps the thread) until the child has exited. Go's fork re-checks the
// parent after setting the signal, so a parent that dies during the fork
// is caught too.
//
// On other systems the child is started plainly and outlives a killed
// parent, as before.
package childproc
