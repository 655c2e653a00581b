# The reentrant lock of the device allocator and the pinned host cache (allocator.pyx,
# Note [Allocator locks]): tried without waiting first, and waited for with the GIL released,
# so that a thread holding it while it waits for the GIL cannot deadlock with this one.
from cpython.pythread cimport (NOWAIT_LOCK, WAIT_LOCK, PyThread_acquire_lock,
                               PyThread_get_thread_ident, PyThread_release_lock,
                               PyThread_type_lock)

cdef struct ReentrantLock:
    PyThread_type_lock handle
    long owner    # thread ident of the holder, 0 when free
    int depth     # how many times the holder has entered


cdef inline void acquire(ReentrantLock* lock) noexcept:
    cdef long me = PyThread_get_thread_ident()
    if lock.owner == me:
        lock.depth += 1
        return
    if not PyThread_acquire_lock(lock.handle, NOWAIT_LOCK):
        with nogil:
            PyThread_acquire_lock(lock.handle, WAIT_LOCK)
    lock.owner = me
    lock.depth = 1


cdef inline void release_lock(ReentrantLock* lock) noexcept:
    lock.depth -= 1
    if lock.depth == 0:
        lock.owner = 0
        PyThread_release_lock(lock.handle)
