/* spank_squash.so named twice in plugstack.conf, typically by the packaged
 * /etc/slurm/plugstack.conf.d/squash.conf (which Debian's plugstack.conf
 * includes) and by a `required .../spank_squash.so` line added by hand.
 *
 * Slurm then loads both lines: its "cowardly refusing to load a second
 * time" check compares the two path pointers, never the paths (22.05 to
 * 26.05, src/common/spank.c). dlopen() of the same file returns the same
 * handle, so both share this plugin's statics, and every callback runs once
 * per line in the same process. A second slurm_spank_init before
 * slurm_spank_exit, or a second job prolog or epilog in one process (each
 * runs in a process of its own), is therefore the second line. */
#ifndef SPANK_SQUASH_LOADED_TWICE_H
#define SPANK_SQUASH_LOADED_TWICE_H

#include <stdbool.h>

/* At each slurm_spank_init: true when this process already ran one and has
 * not run slurm_spank_exit since. */
bool squash_init_seen_before(void);

/* At slurm_spank_exit: the next init in this process is a first one. */
void squash_init_forget(void);

/* At each job prolog, and each job epilog: true when this process already
 * ran one. */
bool squash_prolog_seen_before(void);
bool squash_epilog_seen_before(void);

/* What is wrong and how to fix it, for slurmd's log and for users. */
extern const char squash_loaded_twice_reason[];

#endif
