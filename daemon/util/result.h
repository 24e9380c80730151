/* Outcome of a daemon operation: who is at fault decides what the job sees
 * and whether the node's log gets an error. */
#ifndef SQUASHD_RESULT_H
#define SQUASHD_RESULT_H

enum result {
	RESULT_OK = 0,
	RESULT_USER_ERROR = 1, /* the job asked for something wrong */
	RESULT_NODE_ERROR = 2, /* this node failed (log with cause) */
};

#endif
