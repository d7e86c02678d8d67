// MPI_* entry points that only mark their call as MPI's for the memory meter (memory.hpp's
// mpi_heap): what MPI allocates inside them (progress in a wait, a datatype's description, a
// group) is counted apart from the kernel's peak. The recorded calls (wrappers.cpp) mark
// themselves the same way. Part of shardcheck::pmpi.
#include <mpi.h>

#include "shardcheck/parallel/memory.hpp"

using shardcheck::mem::mpi_heap;

extern "C" {

// ---- completion -------------------------------------------------------------------------------

int MPI_Wait(MPI_Request* request, MPI_Status* status) {
  const mpi_heap in_mpi;
  return PMPI_Wait(request, status);
}
int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
  const mpi_heap in_mpi;
  return PMPI_Waitall(count, requests, statuses);
}
int MPI_Waitany(int count, MPI_Request requests[], int* index, MPI_Status* status) {
  const mpi_heap in_mpi;
  return PMPI_Waitany(count, requests, index, status);
}
int MPI_Waitsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                 MPI_Status statuses[]) {
  const mpi_heap in_mpi;
  return PMPI_Waitsome(incount, requests, outcount, indices, statuses);
}
int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  const mpi_heap in_mpi;
  return PMPI_Test(request, flag, status);
}
int MPI_Testall(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]) {
  const mpi_heap in_mpi;
  return PMPI_Testall(count, requests, flag, statuses);
}
int MPI_Testany(int count, MPI_Request requests[], int* index, int* flag, MPI_Status* status) {
  const mpi_heap in_mpi;
  return PMPI_Testany(count, requests, index, flag, status);
}
int MPI_Testsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                 MPI_Status statuses[]) {
  const mpi_heap in_mpi;
  return PMPI_Testsome(incount, requests, outcount, indices, statuses);
}
int MPI_Request_free(MPI_Request* request) {
  const mpi_heap in_mpi;
  return PMPI_Request_free(request);
}
int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status* status) {
  const mpi_heap in_mpi;
  return PMPI_Probe(source, tag, comm, status);
}
int MPI_Iprobe(int source, int tag, MPI_Comm comm, int* flag, MPI_Status* status) {
  const mpi_heap in_mpi;
  return PMPI_Iprobe(source, tag, comm, flag, status);
}

// ---- datatypes, operations, groups ------------------------------------------------------------

int MPI_Type_contiguous(int count, MPI_Datatype oldtype, MPI_Datatype* newtype) {
  const mpi_heap in_mpi;
  return PMPI_Type_contiguous(count, oldtype, newtype);
}
int MPI_Type_vector(int count, int blocklength, int stride, MPI_Datatype oldtype,
                    MPI_Datatype* newtype) {
  const mpi_heap in_mpi;
  return PMPI_Type_vector(count, blocklength, stride, oldtype, newtype);
}
int MPI_Type_create_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype,
                            MPI_Datatype* newtype) {
  const mpi_heap in_mpi;
  return PMPI_Type_create_hvector(count, blocklength, stride, oldtype, newtype);
}
int MPI_Type_indexed(int count, const int blocklengths[], const int displacements[],
                     MPI_Datatype oldtype, MPI_Datatype* newtype) {
  const mpi_heap in_mpi;
  return PMPI_Type_indexed(count, blocklengths, displacements, oldtype, newtype);
}
int MPI_Type_create_struct(int count, const int blocklengths[], const MPI_Aint displacements[],
                           const MPI_Datatype types[], MPI_Datatype* newtype) {
  const mpi_heap in_mpi;
  return PMPI_Type_create_struct(count, blocklengths, displacements, types, newtype);
}
int MPI_Type_create_subarray(int ndims, const int sizes[], const int subsizes[], const int starts[],
                             int order, MPI_Datatype oldtype, MPI_Datatype* newtype) {
  const mpi_heap in_mpi;
  return PMPI_Type_create_subarray(ndims, sizes, subsizes, starts, order, oldtype, newtype);
}
int MPI_Type_create_resized(MPI_Datatype oldtype, MPI_Aint lb, MPI_Aint extent,
                            MPI_Datatype* newtype) {
  const mpi_heap in_mpi;
  return PMPI_Type_create_resized(oldtype, lb, extent, newtype);
}
int MPI_Type_dup(MPI_Datatype oldtype, MPI_Datatype* newtype) {
  const mpi_heap in_mpi;
  return PMPI_Type_dup(oldtype, newtype);
}
int MPI_Type_commit(MPI_Datatype* datatype) {
  const mpi_heap in_mpi;
  return PMPI_Type_commit(datatype);
}
int MPI_Type_free(MPI_Datatype* datatype) {
  const mpi_heap in_mpi;
  return PMPI_Type_free(datatype);
}
int MPI_Op_create(MPI_User_function* function, int commute, MPI_Op* op) {
  const mpi_heap in_mpi;
  return PMPI_Op_create(function, commute, op);
}
int MPI_Op_free(MPI_Op* op) {
  const mpi_heap in_mpi;
  return PMPI_Op_free(op);
}
// Attributes: a keyval and the attribute's entry are MPI's (a datatype made once for the run
// registers its release at MPI_Finalize through one, comm.cpp).
int MPI_Comm_create_keyval(MPI_Comm_copy_attr_function* copy, MPI_Comm_delete_attr_function* del,
                           int* keyval, void* extra_state) {
  const mpi_heap in_mpi;
  return PMPI_Comm_create_keyval(copy, del, keyval, extra_state);
}
int MPI_Comm_free_keyval(int* keyval) {
  const mpi_heap in_mpi;
  return PMPI_Comm_free_keyval(keyval);
}
int MPI_Comm_set_attr(MPI_Comm comm, int keyval, void* value) {
  const mpi_heap in_mpi;
  return PMPI_Comm_set_attr(comm, keyval, value);
}
int MPI_Comm_delete_attr(MPI_Comm comm, int keyval) {
  const mpi_heap in_mpi;
  return PMPI_Comm_delete_attr(comm, keyval);
}
int MPI_Comm_group(MPI_Comm comm, MPI_Group* group) {
  const mpi_heap in_mpi;
  return PMPI_Comm_group(comm, group);
}
int MPI_Group_incl(MPI_Group group, int n, const int ranks[], MPI_Group* newgroup) {
  const mpi_heap in_mpi;
  return PMPI_Group_incl(group, n, ranks, newgroup);
}
int MPI_Group_free(MPI_Group* group) {
  const mpi_heap in_mpi;
  return PMPI_Group_free(group);
}

}  // extern "C"
