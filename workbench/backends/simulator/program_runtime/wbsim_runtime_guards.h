/* The include guards and version macros of the toolkit's runtime headers, as
 * cuda_runtime.h defines them: headers that test them (the CUDA samples' helper_cuda.h
 * defines checkCudaErrors and findCudaDevice only #ifdef __DRIVER_TYPES_H__ /
 * __CUDA_RUNTIME_H__) see the runtime API. */
#ifndef WBSIM_RUNTIME_GUARDS_H
#define WBSIM_RUNTIME_GUARDS_H
/* the toolkit's version (the prelude's, where it is included) */
#ifndef CUDART_VERSION
#define CUDART_VERSION 13000
#endif

/* cuda_runtime.h, cuda_runtime_api.h, driver_types.h, vector_types.h ... of the toolkit */
#define __CUDA_RUNTIME_H__
#define __CUDA_RUNTIME_API_H__
#define __DRIVER_TYPES_H__
#define __DRIVER_FUNCTIONS_H__
#define __VECTOR_TYPES_H__
#define __VECTOR_FUNCTIONS_H__
#define __BUILTIN_TYPES_H__
#define __HOST_DEFINES_H__
#define __DEVICE_TYPES_H__
#define __TEXTURE_TYPES_H__
#define __SURFACE_TYPES_H__
#define __CUDA_TEXTURE_TYPES_H__
#define __CUDA_SURFACE_TYPES_H__
#define __TEXTURE_FETCH_FUNCTIONS_H__
#define __SURFACE_FUNCTIONS_H__
#define __CHANNEL_DESCRIPTOR_H__
#define __CUDA_DEVICE_RUNTIME_API_H__
#define __DEVICE_LAUNCH_PARAMETERS_H__
#define CUDART_CB
#define CUDARTAPI
#define __CUDA_API_VERSION 13000
#endif
