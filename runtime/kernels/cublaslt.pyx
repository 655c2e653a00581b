# cython: language_level=3
"""Matrix products through NVIDIA's cuBLASLt, called at C level through nvmath-python's Cython
bindings (nvmath.bindings.cycublasLt), which load the library from the nvidia-cublas wheel (or
a CUDA toolkit) through cuda-pathfinder.

Note [Matrix products through cuBLASLt]
The tensor layer imports this module on its first CUDA matmul (tensor/linalg.pyx) and calls
`matmul` through the function pointer in MATMUL_FUNCTION, so that `import tensorplay` neither
loads nvmath-python nor the cuBLASLt library, and makes no CUDA call.
- Layouts. cuBLASLt reads column-major matrices. A row-major product C = A @ B is computed as
  C^T = B^T @ A^T: C's memory read column-major is C^T (n x m, leading dimension n), and each
  operand passes as it lies in memory, with a transpose flag where its columns are the adjacent
  elements (a transposed view); a batch stride of 0 repeats one matrix (broadcast batches).
- Handles: one per (device, thread), made on the thread's first product on that device. A
  thread that ends leaves its handles to the next thread that needs one, as PyTorch's handle
  pool does (aten/src/ATen/cuda/CublasHandlePool.cpp).
- Plans: the heuristic query (cublasLtMatmulAlgoGetHeuristic) costs microseconds, so its answer
  and the descriptors are kept per problem (device, dtype, precision, each operand's transpose,
  shape, leading dimension, batch stride and address alignment); the cache is emptied when it
  reaches MAX_PLANS problems.
- Workspace: what the chosen algorithm needs (at most MAX_WORKSPACE_BYTES, cuBLAS's recommended
  size for Hopper), from the caching allocator on the calling stream and released to it after
  the call, stream-ordered; inside a capture it therefore comes from the graph's pool.
- Under capture: making a handle or a plan runs in relaxed capture mode, as CUDA allows for
  calls that are not stream work (CUDA Programming Guide, "Cross-stream dependencies and
  events" / cudaThreadExchangeStreamCaptureMode), so that a first product inside a capture in
  global mode is legal; cublasLtMatmul itself only launches kernels on the stream, which the
  capture records (cuBLAS documentation, "CUDA Graphs support").
Everything here runs holding the GIL: the plan cache is shared by threads, and a launch is
asynchronous, as every other kernel launch of the runtime.

Sources: https://docs.nvidia.com/cuda/cublas/#using-the-cublaslt-api,
https://docs.nvidia.com/cuda/cublas/#cublassetworkspace (workspace sizes),
https://docs.nvidia.com/cuda/nvmath-python/latest/bindings/index.html.
"""
from cython.operator cimport dereference
from libc.stdint cimport int64_t, uint32_t, uint64_t, uintptr_t
from libc.string cimport memset
from libcpp.unordered_map cimport unordered_map
from cpython.pycapsule cimport PyCapsule_New

from cuda.bindings cimport cyruntime
from nvmath.bindings cimport cycublas, cycublasLt as lt
from nvmath.bindings._internal.common_types cimport cudaDataType_t

from tensorplay._runtime.base cimport errors
from tensorplay._runtime.devices cimport device as _device
from tensorplay._runtime.kernels.blas cimport (MatmulProblem, MatrixOperand, MATMUL_FLOAT32,
                                               MATMUL_FLOAT64, PRECISION_HIGH, PRECISION_MEDIUM)
from tensorplay._runtime.memory cimport allocator

cdef extern from *:
    """
    #include <cstring>
    #include <mutex>
    #include <vector>

    // A problem as the plan cache's key: TP_PLAN_KEY_VALUES integers, compared and hashed whole.
    enum { TP_PLAN_KEY_VALUES = 24, TP_MAX_DEVICES = 64 };
    struct TpPlanKey { long long values[TP_PLAN_KEY_VALUES]; };
    struct TpPlanKeyHash {
        size_t operator()(const TpPlanKey& key) const noexcept {
            unsigned long long hash = 1469598103934665603ULL;   // FNV-1a, a value at a time
            for (int i = 0; i < TP_PLAN_KEY_VALUES; ++i) {
                hash ^= (unsigned long long)key.values[i];
                hash *= 1099511628211ULL;
            }
            return (size_t)hash;
        }
    };
    struct TpPlanKeyEqual {
        bool operator()(const TpPlanKey& a, const TpPlanKey& b) const noexcept {
            return std::memcmp(a.values, b.values, sizeof a.values) == 0;
        }
    };

    // Handles of this thread, per device; at the thread's end they go to the idle lists, from
    // which a later thread takes them (try_lock: a child forked while another thread held the
    // lock leaves its handles behind rather than wait forever).
    static std::mutex tp_idle_lock;
    static std::vector<void*> tp_idle_handles[TP_MAX_DEVICES];
    struct TpThreadHandles {
        void* handles[TP_MAX_DEVICES];
        TpThreadHandles() { std::memset(handles, 0, sizeof handles); }
        ~TpThreadHandles() {
            if (!tp_idle_lock.try_lock()) return;
            for (int d = 0; d < TP_MAX_DEVICES; ++d)
                if (handles[d]) tp_idle_handles[d].push_back(handles[d]);
            tp_idle_lock.unlock();
        }
    };
    static thread_local TpThreadHandles tp_thread_handles;
    static void** tp_thread_handle_slot(int device) { return &tp_thread_handles.handles[device]; }
    static void* tp_take_idle_handle(int device) {
        std::lock_guard<std::mutex> guard(tp_idle_lock);
        if (tp_idle_handles[device].empty()) return NULL;
        void* handle = tp_idle_handles[device].back();
        tp_idle_handles[device].pop_back();
        return handle;
    }
    """
    cdef struct TpPlanKey:
        long long values[24]
    cdef cppclass TpPlanKeyHash:
        pass
    cdef cppclass TpPlanKeyEqual:
        pass
    void** tp_thread_handle_slot(int device) noexcept nogil
    void* tp_take_idle_handle(int device) noexcept nogil


# What a product needs from cuBLASLt: its descriptors, the algorithm chosen, its workspace.
cdef struct Plan:
    lt.cublasLtMatmulDesc_t operation
    lt.cublasLtMatrixLayout_t a_layout
    lt.cublasLtMatrixLayout_t b_layout
    lt.cublasLtMatrixLayout_t c_layout
    lt.cublasLtMatmulAlgo_t algo
    size_t workspace


# The plan cache holds at most this many problems; it is emptied when full.
DEF MAX_PLANS = 1024
# cuBLAS's recommended workspace for Hopper (32 MiB; 4 MiB before it): an upper bound, of which
# only what the chosen algorithm asks for is allocated.
DEF MAX_WORKSPACE_BYTES = 32 * 1024 * 1024

ctypedef unordered_map[TpPlanKey, Plan, TpPlanKeyHash, TpPlanKeyEqual] PlanMap
cdef PlanMap plans

cdef extern from "library_types.h":
    cudaDataType_t CUDA_R_32F
    cudaDataType_t CUDA_R_64F
    cudaDataType_t CUDA_R_16F
    cudaDataType_t CUDA_R_16BF

# The cudaDataType of each MatmulDtype (blas.pxd's order).
cdef cudaDataType_t DATA_TYPES[4]
DATA_TYPES[:] = [CUDA_R_32F, CUDA_R_64F, CUDA_R_16F, CUDA_R_16BF]


cdef int check(cycublas.cublasStatus_t status, str call) except -1:
    if status != cycublas.CUBLAS_STATUS_SUCCESS:
        name = cycublas.cublasGetStatusName(status).decode()
        raise RuntimeError(f"cuBLASLt: {call} failed with {name} ({<int>status})")
    return 0


cdef cycublas.cublasComputeType_t compute_type(const MatmulProblem* problem) noexcept:
    if problem.dtype == MATMUL_FLOAT64:
        return cycublas.CUBLAS_COMPUTE_64F
    if problem.dtype == MATMUL_FLOAT32 and problem.precision == PRECISION_HIGH:
        return cycublas.CUBLAS_COMPUTE_32F_FAST_TF32
    if problem.dtype == MATMUL_FLOAT32 and problem.precision == PRECISION_MEDIUM:
        return cycublas.CUBLAS_COMPUTE_32F_FAST_16BF
    return cycublas.CUBLAS_COMPUTE_32F   # float32, and 16-bit floats accumulated in float32


cdef int64_t alignment(uintptr_t address) noexcept:
    """The largest power of two up to 256 that divides address (cuBLASLt picks kernels by it)."""
    cdef int64_t align = 256
    while align > 1 and address % align:
        align //= 2
    return align


cdef struct Stored:
    # How cuBLASLt reads an operand O when it must supply O's transpose: O itself read
    # column-major with the transpose flag, or O^T read column-major as it lies.
    cycublas.cublasOperation_t op
    uint64_t rows
    uint64_t columns
    int64_t leading
    int64_t batch_stride


cdef Stored stored_transpose(const MatrixOperand* operand) noexcept:
    cdef Stored result
    result.batch_stride = operand.batch_stride
    if (operand.column_stride == 1 or operand.columns == 1) and \
            (operand.row_stride >= operand.columns or operand.rows == 1):
        # Rows are adjacent: the memory read column-major is O^T (columns x rows).
        result.op = cycublas.CUBLAS_OP_N
        result.rows, result.columns = operand.columns, operand.rows
        result.leading = operand.row_stride if operand.rows > 1 else operand.columns
    else:
        # Columns are adjacent (blas.operand_usable): the memory read column-major is O.
        result.op = cycublas.CUBLAS_OP_T
        result.rows, result.columns = operand.rows, operand.columns
        result.leading = operand.column_stride if operand.columns > 1 else operand.rows
    return result


cdef void put_key(TpPlanKey* key, const MatmulProblem* problem, const Stored* x,
                  const Stored* y) noexcept:
    memset(key, 0, sizeof(TpPlanKey))
    cdef long long* v = key.values
    v[0], v[1], v[2], v[3] = problem.device, problem.dtype, compute_type(problem), problem.batch
    v[4], v[5], v[6], v[7], v[8] = x.op, x.rows, x.columns, x.leading, x.batch_stride
    v[9], v[10], v[11], v[12], v[13] = y.op, y.rows, y.columns, y.leading, y.batch_stride
    v[14] = alignment(problem.b.address)    # x is b's, y is a's (Note [...]: C^T = B^T A^T)
    v[15] = alignment(problem.a.address)
    v[16] = alignment(problem.c)


cdef int destroy_plan(Plan* plan) except -1:
    """Destroys what plan holds (what was made of it, on a failure half way)."""
    cdef Plan held = plan[0]
    memset(plan, 0, sizeof(Plan))
    if held.operation != NULL:
        check(lt.cublasLtMatmulDescDestroy(held.operation), "cublasLtMatmulDescDestroy")
    cdef lt.cublasLtMatrixLayout_t layouts[3]
    layouts[:] = [held.a_layout, held.b_layout, held.c_layout]
    for layout in layouts:
        if layout != NULL:
            check(lt.cublasLtMatrixLayoutDestroy(layout), "cublasLtMatrixLayoutDestroy")
    return 0


cdef int empty_plans() except -1:
    for entry in plans:
        destroy_plan(&entry.second)
    plans.clear()
    return 0


cdef lt.cublasLtMatrixLayout_t make_layout(cudaDataType_t data_type, uint64_t rows,
                                           uint64_t columns, int64_t leading, int64_t batch,
                                           int64_t batch_stride) except NULL:
    cdef lt.cublasLtMatrixLayout_t layout = NULL
    check(lt.cublasLtMatrixLayoutCreate(&layout, data_type, rows, columns, leading),
          "cublasLtMatrixLayoutCreate")
    cdef int count = <int>batch
    try:
        if batch > 1:
            check(lt.cublasLtMatrixLayoutSetAttribute(
                layout, lt.CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(int)),
                "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)")
            check(lt.cublasLtMatrixLayoutSetAttribute(
                layout, lt.CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &batch_stride,
                sizeof(int64_t)), "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)")
    except BaseException:
        lt.cublasLtMatrixLayoutDestroy(layout)
        raise
    return layout


cdef int set_preference(lt.cublasLtMatmulPreference_t preference,
                        lt.cublasLtMatmulPreferenceAttributes_t attribute,
                        uint32_t value) except -1:
    return check(lt.cublasLtMatmulPreferenceSetAttribute(preference, attribute, &value,
                                                         sizeof(uint32_t)),
                 "cublasLtMatmulPreferenceSetAttribute")


cdef int make_plan(lt.cublasLtHandle_t handle, const MatmulProblem* problem, const Stored* x,
                   const Stored* y, const TpPlanKey* key, Plan* plan) except -1:
    """The descriptors and algorithm of problem, into plan (left empty on failure)."""
    cdef cudaDataType_t data_type = DATA_TYPES[<int>problem.dtype]
    cdef cudaDataType_t scale_type = CUDA_R_64F if problem.dtype == MATMUL_FLOAT64 else CUDA_R_32F
    cdef lt.cublasLtMatmulPreference_t preference = NULL
    cdef lt.cublasLtMatmulHeuristicResult_t result
    cdef int found = 0
    cdef cycublas.cublasOperation_t op
    cdef uint64_t workspace_limit = MAX_WORKSPACE_BYTES
    memset(plan, 0, sizeof(Plan))
    try:
        check(lt.cublasLtMatmulDescCreate(&plan.operation, compute_type(problem), scale_type),
              "cublasLtMatmulDescCreate")
        op = x.op
        check(lt.cublasLtMatmulDescSetAttribute(plan.operation, lt.CUBLASLT_MATMUL_DESC_TRANSA,
                                                &op, sizeof(op)),
              "cublasLtMatmulDescSetAttribute(TRANSA)")
        op = y.op
        check(lt.cublasLtMatmulDescSetAttribute(plan.operation, lt.CUBLASLT_MATMUL_DESC_TRANSB,
                                                &op, sizeof(op)),
              "cublasLtMatmulDescSetAttribute(TRANSB)")
        plan.a_layout = make_layout(data_type, x.rows, x.columns, x.leading, problem.batch,
                                    x.batch_stride)
        plan.b_layout = make_layout(data_type, y.rows, y.columns, y.leading, problem.batch,
                                    y.batch_stride)
        # C^T: n x m, leading dimension n, a contiguous batch.
        plan.c_layout = make_layout(data_type, <uint64_t>problem.b.columns,
                                    <uint64_t>problem.a.rows, problem.b.columns, problem.batch,
                                    problem.a.rows * problem.b.columns)
        check(lt.cublasLtMatmulPreferenceCreate(&preference), "cublasLtMatmulPreferenceCreate")
        check(lt.cublasLtMatmulPreferenceSetAttribute(
            preference, lt.CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_limit,
            sizeof(uint64_t)), "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)")
        set_preference(preference, lt.CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.values[14])
        set_preference(preference, lt.CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.values[15])
        set_preference(preference, lt.CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.values[16])
        set_preference(preference, lt.CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.values[16])
        check(lt.cublasLtMatmulAlgoGetHeuristic(handle, plan.operation, plan.a_layout,
                                                plan.b_layout, plan.c_layout, plan.c_layout,
                                                preference, 1, &result, &found),
              "cublasLtMatmulAlgoGetHeuristic")
        if found == 0:
            raise RuntimeError(
                f"cuBLASLt has no algorithm for this matrix product ({problem.a.rows} x "
                f"{problem.a.columns} @ {problem.b.rows} x {problem.b.columns}, batch "
                f"{problem.batch})")
        plan.algo = result.algo
        plan.workspace = result.workspaceSize
    except BaseException:
        destroy_plan(plan)
        raise
    finally:
        if preference != NULL:
            lt.cublasLtMatmulPreferenceDestroy(preference)
    return 0


cdef lt.cublasLtHandle_t thread_handle(int device) except NULL:
    """This thread's handle for device (whose context is current), made on first use."""
    cdef void** slot = tp_thread_handle_slot(device)
    if slot[0] != NULL:
        return slot[0]
    cdef lt.cublasLtHandle_t handle = tp_take_idle_handle(device)
    if handle == NULL:
        check(lt.cublasLtCreate(&handle), "cublasLtCreate")
    slot[0] = handle
    return handle


cdef int capture_mode_exchange(cyruntime.cudaStreamCaptureMode* mode) except -1:
    return errors.check(cyruntime.cudaThreadExchangeStreamCaptureMode(mode),
                        b"cudaThreadExchangeStreamCaptureMode")


cdef Plan* find_plan(lt.cublasLtHandle_t* handle, const MatmulProblem* problem, const Stored* x,
                     const Stored* y) except NULL:
    """The cached plan of problem, made on a miss (with the thread's handle, into *handle)."""
    cdef TpPlanKey key
    cdef PlanMap.iterator found
    put_key(&key, problem, x, y)
    handle[0] = <lt.cublasLtHandle_t>tp_thread_handle_slot(problem.device)[0]
    found = plans.find(key)
    if found != plans.end() and handle[0] != NULL:
        return &dereference(found).second
    cdef Plan plan
    cdef cyruntime.cudaStreamCaptureMode mode = cyruntime.cudaStreamCaptureModeRelaxed
    cdef bint relaxed = _device.capture_open()
    if relaxed:   # Note [Matrix products through cuBLASLt], under capture
        capture_mode_exchange(&mode)
    try:
        handle[0] = thread_handle(problem.device)
        if found != plans.end():
            return &dereference(found).second
        make_plan(handle[0], problem, x, y, &key, &plan)
    finally:
        if relaxed:
            capture_mode_exchange(&mode)
    if plans.size() >= MAX_PLANS:
        empty_plans()
    plans[key] = plan
    return &plans[key]


cdef int matmul(const MatmulProblem* problem) except -1:
    """problem's product on its stream (blas.pxd: MatmulProblem); both operands usable."""
    cdef Stored x = stored_transpose(&problem.b)    # C^T = B^T A^T
    cdef Stored y = stored_transpose(&problem.a)
    cdef double alpha_double = 1.0, beta_double = 0.0
    cdef float alpha_float = 1.0, beta_float = 0.0
    cdef const void* alpha = &alpha_double if problem.dtype == MATMUL_FLOAT64 else &alpha_float
    cdef const void* beta = &beta_double if problem.dtype == MATMUL_FLOAT64 else &beta_float
    cdef lt.cublasLtHandle_t handle
    cdef Plan* plan
    cdef void* workspace = NULL
    cdef _device.DeviceSwitch switch
    _device.enter_device(problem.device, &switch)
    try:
        plan = find_plan(&handle, problem, &x, &y)
        if plan.workspace:
            workspace = allocator.allocate(problem.device, plan.workspace, problem.stream)
        try:
            check(lt.cublasLtMatmul(handle, plan.operation, alpha, <void*>problem.b.address,
                                    plan.a_layout, <void*>problem.a.address, plan.b_layout,
                                    beta, <void*>problem.c, plan.c_layout, <void*>problem.c,
                                    plan.c_layout, &plan.algo, workspace, plan.workspace,
                                    problem.stream), "cublasLtMatmul")
        finally:
            if workspace != NULL:
                allocator.release(workspace)   # stream-ordered: reused after this product
    finally:
        _device.exit_device(&switch)
    return 0


# The entry point the tensor layer calls (blas.pxd, MatmulFunction), and the number of cached
# plans, for the tests.
MATMUL_FUNCTION = PyCapsule_New(<void*>matmul, b"tensorplay.blas.MatmulFunction", NULL)


def cached_plans():
    return plans.size()
