// A texture object over a CUDA array (normalised coordinates, wrap, linear filtering) and
// a surface object written by a kernel, as the samples' simpleTexture and
// simpleSurfaceWrite use them.
#include <cstdio>
#include <helper_check.h>

__global__ void sample(cudaTextureObject_t tex, float* out, int w, int h) {
    int x = threadIdx.x, y = blockIdx.x;
    // past the edges (wrapped), a quarter and a half of a texel off the centres: weights
    // that the GPU's 8 fractional bits hold exactly
    float u = (x + 0.25f) / w + 0.0625f, v = (y + 0.5f) / h - 0.375f;
    out[y * w + x] = tex2D<float>(tex, u, v);
}
__global__ void writeSurface(cudaSurfaceObject_t surf, int w) {
    int x = threadIdx.x, y = blockIdx.x;
    surf2Dwrite((float)(y * 100 + x), surf, x * (int)sizeof(float), y);
}
__global__ void readPoint(cudaTextureObject_t tex, float* out, int w) {
    int x = threadIdx.x, y = blockIdx.x;
    out[y * w + x] = tex2D<float>(tex, x + 0.5f, y + 0.5f);
}

int main() {
    const int w = 8, h = 4;
    float data[h * w];
    for (int i = 0; i < h * w; ++i) data[i] = (float)((i * 7) % 11);
    cudaChannelFormatDesc desc = cudaCreateChannelDesc(32, 0, 0, 0, cudaChannelFormatKindFloat);
    cudaArray_t array;
    checkCuda(cudaMallocArray(&array, &desc, w, h, cudaArraySurfaceLoadStore));
    checkCuda(cudaMemcpy2DToArray(array, 0, 0, data, w * sizeof(float), w * sizeof(float), h,
                                  cudaMemcpyHostToDevice));
    cudaResourceDesc res = {};
    res.resType = cudaResourceTypeArray;
    res.res.array.array = array;
    cudaTextureDesc td = {};
    td.addressMode[0] = td.addressMode[1] = cudaAddressModeWrap;
    td.filterMode = cudaFilterModeLinear;
    td.readMode = cudaReadModeElementType;
    td.normalizedCoords = 1;
    cudaTextureObject_t tex;
    checkCuda(cudaCreateTextureObject(&tex, &res, &td, nullptr));
    float* out;
    checkCuda(cudaMallocManaged(&out, h * w * sizeof(float)));
    sample<<<h, w>>>(tex, out, w, h);
    checkCuda(cudaDeviceSynchronize());
    for (int y = 0; y < h; ++y) {
        for (int x = 0; x < w; ++x) printf("%.4f ", out[y * w + x]);
        printf("\n");
    }

    cudaSurfaceObject_t surf;
    checkCuda(cudaCreateSurfaceObject(&surf, &res));
    writeSurface<<<h, w>>>(surf, w);
    td.filterMode = cudaFilterModePoint;
    td.normalizedCoords = 0;
    td.addressMode[0] = td.addressMode[1] = cudaAddressModeClamp;
    cudaTextureObject_t points;
    checkCuda(cudaCreateTextureObject(&points, &res, &td, nullptr));
    readPoint<<<h, w>>>(points, out, w);
    checkCuda(cudaDeviceSynchronize());
    printf("surface: %g %g %g\n", out[0], out[w + 3], out[(h - 1) * w + w - 1]);
    checkCuda(cudaDestroyTextureObject(tex));
    checkCuda(cudaDestroyTextureObject(points));
    checkCuda(cudaDestroySurfaceObject(surf));
    checkCuda(cudaFreeArray(array));
    return 0;
}
