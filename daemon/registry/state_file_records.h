/* The known records of the state file, one parser each (state_file_load.c
 * reads the lines and decides what a bad one drops). Each takes the
 * record's fields (fv[0] its kind) and returns 0, or -1 when it is bad. */
#ifndef SQUASHD_STATE_FILE_RECORDS_H
#define SQUASHD_STATE_FILE_RECORDS_H

#include "registry/registry.h"

int parse_mount(struct registry *r, char **fv, int n);
int parse_merged(struct registry *r, char **fv, int n);
int parse_part(struct registry *r, char **fv, int n);
int parse_linger(struct registry *r, char **fv, int n);
int parse_overlay(struct registry *r, char **fv, int n);
int parse_upper(struct registry *r, char **fv, int n);
int parse_endwatch(struct registry *r, char **fv, int n);
int parse_job(struct registry *r, char **fv, int n);
int parse_image(struct registry *r, char **fv, int n);
int parse_scope(struct registry *r, char **fv, int n);
int parse_scoped_image(struct registry *r, char **fv, int n);

#endif
