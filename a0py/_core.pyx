# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Binding of the a0py C core: arenas, the frame transport, the deadman,
packets and the many-arena wait.

A thin layer over csrc/: every blocking call releases the GIL; frame bytes
are handed out as zero-copy memoryviews that are released when the lock is;
C error codes become the exceptions of :mod:`a0py.errors`.

This file only assembles the extension, as uvloop's loop.pyx does: the C
declarations are in ``includes/`` (one .pxd per csrc/ header), the code in
``binding/`` (one included file per concept).
"""

cimport cython
from cpython.buffer cimport (
    PyBUF_RECORDS_RO, PyBUF_SIMPLE, PyBUF_WRITABLE, PyBuffer_FillInfo, PyBuffer_Release, PyObject_GetBuffer,
)
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.exc cimport PyErr_CheckSignals
from cpython.unicode cimport PyUnicode_AsUTF8AndSize, PyUnicode_DecodeUTF8
from libc.errno cimport errno
from libc.stdint cimport UINT64_MAX, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcmp, memcpy, memmove, memset
from posix.mman cimport MAP_FAILED, MAP_SHARED, PROT_READ, PROT_WRITE, mmap, munmap
from posix.time cimport CLOCK_MONOTONIC, CLOCK_REALTIME, clock_gettime, timespec
from posix.unistd cimport close as c_close

from .includes.a0_arena cimport *
from .includes.a0_deadman cimport *
from .includes.a0_err cimport *
from .includes.a0_multiwait cimport *
from .includes.a0_packet cimport *
from .includes.a0_sync cimport *
from .includes.a0_transport cimport *

import errno as _errno
import fcntl
import json as _json
import numbers
import os
import pwd
import shlex
import stat
import time

import posix_ipc

from .errors import (
    A0Error,
    A0OSError,
    A0TimeoutError,
    ArenaCorruptError,
    ArenaExistsError,
    ArenaFormatError,
    ArenaNotFoundError,
    ArenaPermissionError,
    ArgumentError,
    BufferTooSmallError,
    ClosedError,
    EmptyError,
    FrameEvictedError,
    FrameTooLargeError,
    LockError,
    NoFrameError,
    PacketCorruptError,
    SeqNotFoundError,
)

# In dependency order: each file uses what the files above it define.
include "binding/layout.pxi"
include "binding/errors.pxi"
include "binding/arena.pxi"
include "binding/lockfree_read.pxi"
include "binding/read_into.pxi"
include "binding/transport.pxi"
include "binding/read_view.pxi"
include "binding/locked_transport.pxi"
include "binding/deadman.pxi"
include "binding/packet.pxi"
include "binding/packet_writer.pxi"
include "binding/packet_reader.pxi"
include "binding/packet_view.pxi"
include "binding/multiwait.pxi"
include "binding/relay.pxi"
