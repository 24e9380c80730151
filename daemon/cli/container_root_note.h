/* squash-images inspect's note for an image without metadata that is a
 * container's whole root file system (etc/os-release and usr/bin at its
 * root: an enroot .sqsh a Pyxis user has, an Apptainer image unpacked):
 * its programs expect to be at '/', so mounted at /squash/NAME they do not
 * work. Asked of squash-reader --cat as the caller (reader_cat.h), bounded
 * like the metadata's read; nothing is said when it cannot tell. */
#ifndef SQUASH_CLI_CONTAINER_ROOT_NOTE_H
#define SQUASH_CLI_CONTAINER_ROOT_NOTE_H

#include <stdbool.h>
#include <stdio.h>

/* Writes one "note:" line to out when image_path is such an image; true
 * when it did. */
bool container_root_note(const char *image_path, FILE *out);

#endif
