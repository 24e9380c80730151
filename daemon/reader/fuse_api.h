/* The libfuse low-level API at the one version squash-reader is written
 * against, for every file that calls it. */
#ifndef SQUASH_READER_FUSE_API_H
#define SQUASH_READER_FUSE_API_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#endif
