/* The factor scale.c multiplies by: editing it must rebuild the cargo (depfile test). */
#define FACTOR 3
