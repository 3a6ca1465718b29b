package controllers

// ConflictRequeue is conflictRequeue, for the envtests.
const ConflictRequeue = conflictRequeue
