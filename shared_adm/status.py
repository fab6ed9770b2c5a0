"""Status codes: MQ_* HRESULTs of MS-MQMQ 2.4 and the NTSTATUS values MS-MQDMPR / MS-MQQP name (MS-ERREF 2.3)."""
from __future__ import annotations

MQ_OK = 0x00000000

MQ_INFORMATION_PROPERTY = 0x400E0001  # One or more of the properties passed resulted in a warning, but the function completed
MQ_INFORMATION_ILLEGAL_PROPERTY = 0x400E0002  # The property ID is invalid
MQ_INFORMATION_PROPERTY_IGNORED = 0x400E0003  # The property specified was ignored for this operation
MQ_INFORMATION_UNSUPPORTED_PROPERTY = 0x400E0004  # The property specified is not supported and was ignored for this operation
MQ_INFORMATION_DUPLICATE_PROPERTY = 0x400E0005  # The property specified is already in the property identifier array
MQ_INFORMATION_OPERATION_PENDING = 0x400E0006  # An asynchronous operation is currently pending
MQ_INFORMATION_FORMATNAME_BUFFER_TOO_SMALL = 0x400E0009  # The format name buffer supplied was too small to hold the format name; however, the queue was create
MQ_INFORMATION_INTERNAL_USER_CERT_EXIST = 0x400E000A  # An internal Message Queuing certificate already exists for this user
MQ_INFORMATION_OWNER_IGNORED = 0x400E000B  # The queue owner was not set during the processing of this call
MQ_ERROR = 0xC00E0001  # Generic error code
MQ_ERROR_PROPERTY = 0xC00E0002  # One or more of the properties passed are invalid
MQ_ERROR_QUEUE_NOT_FOUND = 0xC00E0003  # The queue does not exist or you do not have sufficient permissions to perform the operation
MQ_ERROR_QUEUE_NOT_ACTIVE = 0xC00E0004  # The queue is not open or might not exist
MQ_ERROR_QUEUE_EXISTS = 0xC00E0005  # A queue with the same path name already exists
MQ_ERROR_INVALID_PARAMETER = 0xC00E0006  # An invalid parameter was passed to a function
MQ_ERROR_INVALID_HANDLE = 0xC00E0007  # An invalid handle was passed to a function
MQ_ERROR_OPERATION_CANCELLED = 0xC00E0008  # The operation was canceled before it could be completed
MQ_ERROR_SHARING_VIOLATION = 0xC00E0009  # There is a sharing violation
MQ_ERROR_SERVICE_NOT_AVAILABLE = 0xC00E000B  # The Message Queuing service is not available
MQ_ERROR_MACHINE_NOT_FOUND = 0xC00E000D  # The computer specified cannot be found
MQ_ERROR_ILLEGAL_SORT = 0xC00E0010  # The sort operation specified is invalid; for example, there are duplicate columns
MQ_ERROR_ILLEGAL_USER = 0xC00E0011  # The user specified is not a valid user
MQ_ERROR_NO_DS = 0xC00E0013  # A connection with Active Directory cannot be established
MQ_ERROR_ILLEGAL_QUEUE_PATHNAME = 0xC00E0014  # The queue path name specified is invalid
MQ_ERROR_ILLEGAL_PROPERTY_VALUE = 0xC00E0018  # The property value specified is invalid
MQ_ERROR_ILLEGAL_PROPERTY_VT = 0xC00E0019  # The VARTYPE value specified is invalid
MQ_ERROR_BUFFER_OVERFLOW = 0xC00E001A  # The buffer supplied for message property retrieval is too small
MQ_ERROR_IO_TIMEOUT = 0xC00E001B  # The time specified to wait for the message elapsed
MQ_ERROR_ILLEGAL_CURSOR_ACTION = 0xC00E001C  # The MQ_ACTION_PEEK_NEXT value specified cannot be used with the current cursor position
MQ_ERROR_MESSAGE_ALREADY_RECEIVED = 0xC00E001D  # The message to which the cursor is currently pointing was removed from the queue by another process 
MQ_ERROR_ILLEGAL_FORMATNAME = 0xC00E001E  # The format name specified is invalid
MQ_ERROR_FORMATNAME_BUFFER_TOO_SMALL = 0xC00E001F  # The format name buffer supplied to the API was too small to hold the format name
MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION = 0xC00E0020  # Operations of the type requested (for example, deleting a queue using a direct format name) are not 
MQ_ERROR_ILLEGAL_SECURITY_DESCRIPTOR = 0xC00E0021  # The specified security descriptor is invalid
MQ_ERROR_SENDERID_BUFFER_TOO_SMALL = 0xC00E0022  # The size of the buffer for the user ID property is too small
MQ_ERROR_SECURITY_DESCRIPTOR_TOO_SMALL = 0xC00E0023  # The size of the buffer passed is too small
MQ_ERROR_CANNOT_IMPERSONATE_CLIENT = 0xC00E0024  # The security credentials cannot be verified because the RPC server cannot impersonate the client app
MQ_ERROR_ACCESS_DENIED = 0xC00E0025  # Access is denied
MQ_ERROR_PRIVILEGE_NOT_HELD = 0xC00E0026  # The client does not have sufficient security privileges to perform the operation
MQ_ERROR_INSUFFICIENT_RESOURCES = 0xC00E0027  # There are insufficient resources to perform this operation
MQ_ERROR_USER_BUFFER_TOO_SMALL = 0xC00E0028  # The request failed because the user buffer is too small to hold the information returned
MQ_ERROR_MESSAGE_STORAGE_FAILED = 0xC00E002A  # A recoverable or journal message could not be stored
MQ_ERROR_SENDER_CERT_BUFFER_TOO_SMALL = 0xC00E002B  # The buffer for the user certificate property is too small
MQ_ERROR_INVALID_CERTIFICATE = 0xC00E002C  # The user certificate is invalid
MQ_ERROR_CORRUPTED_INTERNAL_CERTIFICATE = 0xC00E002D  # The internal Message Queuing certificate is corrupted
MQ_ERROR_INTERNAL_USER_CERT_EXIST = 0xC00E002E  # An internal Message Queuing certificate already exists for this user
MQ_ERROR_NO_INTERNAL_USER_CERT = 0xC00E002F  # No internal Message Queuing certificate exists for the user
MQ_ERROR_CORRUPTED_SECURITY_DATA = 0xC00E0030  # A cryptographic function failed
MQ_ERROR_CORRUPTED_PERSONAL_CERT_STORE = 0xC00E0031  # The personal certificate store is corrupted
MQ_ERROR_COMPUTER_DOES_NOT_SUPPORT_ENCRYPTION = 0xC00E0033  # The computer does not support encryption operations
MQ_ERROR_BAD_SECURITY_CONTEXT = 0xC00E0035  # The security context is invalid
MQ_ERROR_COULD_NOT_GET_USER_SID = 0xC00E0036  # The SID cannot be obtained from the thread token
MQ_ERROR_COULD_NOT_GET_ACCOUNT_INFO = 0xC00E0037  # The account information for the user cannot be obtained
MQ_ERROR_ILLEGAL_MQCOLUMNS = 0xC00E0038  # The MQCOLUMNS parameter is invalid
MQ_ERROR_ILLEGAL_PROPID = 0xC00E0039  # A property identifier is invalid
MQ_ERROR_ILLEGAL_RELATION = 0xC00E003A  # A relationship parameter is invalid
MQ_ERROR_ILLEGAL_PROPERTY_SIZE = 0xC00E003B  # The size of the buffer for the message identifier or correlation identifier is invalid
MQ_ERROR_ILLEGAL_RESTRICTION_PROPID = 0xC00E003C  # A property identifier specified in MQRESTRICTION is invalid
MQ_ERROR_ILLEGAL_MQQUEUEPROPS = 0xC00E003D  # Either the pointer to the MQQUEUEPROPS structure has a null value or no properties are specified in 
MQ_ERROR_PROPERTY_NOTALLOWED = 0xC00E003E  # The property identifier specified is invalid for the operation requested
MQ_ERROR_INSUFFICIENT_PROPERTIES = 0xC00E003F  # Not all the properties required for the operation were specified for the input parameters
MQ_ERROR_MACHINE_EXISTS = 0xC00E0040  # The MSMQ Configuration (msmq) object already exists in Active Directory
MQ_ERROR_ILLEGAL_MQQMPROPS = 0xC00E0041  # Either the pointer to the MQQMPROPS structure has a null value, or no properties are specified in it
MQ_ERROR_DS_IS_FULL = 0xC00E0042  # Valid for MSMQ 1.0 and MSMQ 2.0
MQ_ERROR_DS_ERROR = 0xC00E0043  # There is an internal Active Directory error
MQ_ERROR_INVALID_OWNER = 0xC00E0044  # The object owner is invalid
MQ_ERROR_UNSUPPORTED_ACCESS_MODE = 0xC00E0045  # The access mode specified is unsupported
MQ_ERROR_RESULT_BUFFER_TOO_SMALL = 0xC00E0046  # The result buffer specified is too small
MQ_ERROR_DELETE_CN_IN_USE = 0xC00E0048  # Valid for MSMQ 1.0 and MSMQ 2.0
MQ_ERROR_NO_RESPONSE_FROM_OBJECT_SERVER = 0xC00E0049  # There was no response from the object owner
MQ_ERROR_OBJECT_SERVER_NOT_AVAILABLE = 0xC00E004A  # The object owner is not available
MQ_ERROR_QUEUE_NOT_AVAILABLE = 0xC00E004B  # An error occurred while reading from a queue located on a remote computer
MQ_ERROR_DTC_CONNECT = 0xC00E004C  # A connection cannot be established with the Distributed Transaction Coordinator
MQ_ERROR_TRANSACTION_IMPORT = 0xC00E004E  # The transaction specified cannot be imported
MQ_ERROR_TRANSACTION_USAGE = 0xC00E0050  # An attempted action cannot be performed within a transaction
MQ_ERROR_TRANSACTION_SEQUENCE = 0xC00E0051  # The transaction's operation sequence is incorrect
MQ_ERROR_MISSING_CONNECTOR_TYPE = 0xC00E0055  # The connector type message property is not specified
MQ_ERROR_STALE_HANDLE = 0xC00E0056  # The Message Queuing service was restarted
MQ_ERROR_TRANSACTION_ENLIST = 0xC00E0058  # The transaction specified cannot be enlisted
MQ_ERROR_QUEUE_DELETED = 0xC00E005A  # The queue was deleted
MQ_ERROR_ILLEGAL_CONTEXT = 0xC00E005B  # The context parameter is invalid
MQ_ERROR_ILLEGAL_SORT_PROPID = 0xC00E005C  # An invalid property identifier is specified in MQSORTSET
MQ_ERROR_LABEL_TOO_LONG = 0xC00E005D  # The message label is too long
MQ_ERROR_LABEL_BUFFER_TOO_SMALL = 0xC00E005E  # The label buffer supplied to the API is too small
MQ_ERROR_MQIS_SERVER_EMPTY = 0xC00E005F  # Valid for MSMQ 1.0 and MSMQ 2.0
MQ_ERROR_MQIS_READONLY_MODE = 0xC00E0060  # Valid for MSMQ 1.0 and MSMQ 2.0
MQ_ERROR_SYMM_KEY_BUFFER_TOO_SMALL = 0xC00E0061  # The buffer passed for the symmetric key is too small
MQ_ERROR_SIGNATURE_BUFFER_TOO_SMALL = 0xC00E0062  # The buffer passed for the signature property is too small
MQ_ERROR_PROV_NAME_BUFFER_TOO_SMALL = 0xC00E0063  # The buffer passed for the provider name property is too small
MQ_ERROR_ILLEGAL_OPERATION = 0xC00E0064  # The operation is invalid for a foreign Message Queuing system
MQ_ERROR_WRITE_NOT_ALLOWED = 0xC00E0065  # Another MQIS server is being installed
MQ_ERROR_WKS_CANT_SERVE_CLIENT = 0xC00E0066  # The MSMQ service cannot be a supporting server
MQ_ERROR_DEPEND_WKS_LICENSE_OVERFLOW = 0xC00E0067  # The supporting server has reached its limit for accepting application connections
MQ_CORRUPTED_QUEUE_WAS_DELETED = 0xC00E0068  # The corresponding file for the designated queue in the Lqs folder was deleted because it was corrupt
MQ_ERROR_REMOTE_MACHINE_NOT_AVAILABLE = 0xC00E0069  # The remote computer is not available
MQ_ERROR_UNSUPPORTED_OPERATION = 0xC00E006A  # This operation is not supported for Message Queuing installed in workgroup mode
MQ_ERROR_ENCRYPTION_PROVIDER_NOT_SUPPORTED = 0xC00E006B  # The requested cryptographic service provider is not supported by Message Queuing
MQ_ERROR_CANNOT_SET_CRYPTO_SEC_DESCR = 0xC00E006C  # The security descriptors for the cryptographic keys cannot be set
MQ_ERROR_CERTIFICATE_NOT_PROVIDED = 0xC00E006D  # A user attempted to send an authenticated message without a certificate
MQ_ERROR_Q_DNS_PROPERTY_NOT_SUPPORTED = 0xC00E006E  # The column PROPID_Q_PATHNAME_DNS is not supported for the API
MQ_ERROR_CANNOT_CREATE_CERT_STORE = 0xC00E006F  # A certificate store cannot be created for the internal certificate
MQ_ERROR_CANNOT_OPEN_CERT_STORE = 0xC00E0070  # The certificate store for the internal certificate cannot be opened
MQ_ERROR_ILLEGAL_ENTERPRISE_OPERATION = 0xC00E0071  # This operation is invalid for an MsmqServices object
MQ_ERROR_CANNOT_GRANT_ADD_GUID = 0xC00E0072  # The Add GUID permission cannot be granted to the current user
MQ_ERROR_CANNOT_LOAD_MSMQOCM = 0xC00E0073  # Valid for MSMQ 1.0 and MSMQ 2.0
MQ_ERROR_NO_ENTRY_POINT_MSMQOCM = 0xC00E0074  # An entry point cannot be located in Msmqocm.dll
MQ_ERROR_NO_MSMQ_SERVERS_ON_DC = 0xC00E0075  # Message Queuing servers cannot be found on domain controllers
MQ_ERROR_CANNOT_JOIN_DOMAIN = 0xC00E0076  # The computer joined the domain, but Message Queuing will continue to run in workgroup mode because i
MQ_ERROR_CANNOT_CREATE_ON_GC = 0xC00E0077  # The object was not created on the Global Catalog server specified
MQ_ERROR_GUID_NOT_MATCHING = 0xC00E0078  # Valid for MSMQ 1.0 and MSMQ 2.0
MQ_ERROR_PUBLIC_KEY_NOT_FOUND = 0xC00E0079  # The public key for the designated computer cannot be found
MQ_ERROR_PUBLIC_KEY_DOES_NOT_EXIST = 0xC00E007A  # The public key for the designated computer does not exist
MQ_ERROR_ILLEGAL_MQPRIVATEPROPS = 0xC00E007B  # The parameters in MQPRIVATEPROPS are invalid
MQ_ERROR_NO_GC_IN_DOMAIN = 0xC00E007C  # Global Catalog servers cannot be found in the domain specified
MQ_ERROR_NO_MSMQ_SERVERS_ON_GC = 0xC00E007D  # No Message Queuing servers were found on Global Catalog servers
MQ_ERROR_CANNOT_GET_DN = 0xC00E007E  # Valid for MSMQ 1.0 and MSMQ 2.0
MQ_ERROR_CANNOT_HASH_DATA_EX = 0xC00E007F  # Data for an authenticated message cannot be hashed
MQ_ERROR_CANNOT_SIGN_DATA_EX = 0xC00E0080  # Data cannot be signed before sending an authenticated message
MQ_ERROR_CANNOT_CREATE_HASH_EX = 0xC00E0081  # A hash object cannot be created for an authenticated message
MQ_ERROR_FAIL_VERIFY_SIGNATURE_EX = 0xC00E0082  # The signature of the message received is not valid
MQ_ERROR_CANNOT_DELETE_PSC_OBJECTS = 0xC00E0083  # The delete operation against the designated object failed because the object is owned by a PSC
MQ_ERROR_NO_MQUSER_OU = 0xC00E0084  # There is no MSMQ Users organizational unit object in Active Directory for the domain
MQ_ERROR_CANNOT_LOAD_MQAD = 0xC00E0085  # The dynamic-link library Mqad.dll cannot be loaded
MQ_ERROR_CANNOT_LOAD_MQDSSRV = 0xC00E0086  # Obsolete: not used in any version of MSMQ
MQ_ERROR_PROPERTIES_CONFLICT = 0xC00E0087  # Two or more of the properties passed cannot coexist
MQ_ERROR_MESSAGE_NOT_FOUND = 0xC00E0088  # The message does not exist or was removed from the queue
MQ_ERROR_CANT_RESOLVE_SITES = 0xC00E0089  # The sites in which the computer resides cannot be resolved
MQ_ERROR_NOT_SUPPORTED_BY_DEPENDENT_CLIENTS = 0xC00E008A  # This operation is not supported for communicating with a supporting server
MQ_ERROR_OPERATION_NOT_SUPPORTED_BY_REMOTE_COMPUTER = 0xC00E008B  # This operation is not supported by the remote Message Queuing service
MQ_ERROR_NOT_A_CORRECT_OBJECT_CLASS = 0xC00E008C  # The object for which properties were requested from Active Directory does not belong to the class re
MQ_ERROR_MULTI_SORT_KEYS = 0xC00E008D  # The value of cCol in MQSORTSET cannot be greater than 1
MQ_ERROR_GC_NEEDED = 0xC00E008E  # An MSMQ Configuration (msmq) object with the GUID supplied cannot be created
MQ_ERROR_DS_BIND_ROOT_FOREST = 0xC00E008F  # Binding to the forest root failed
MQ_ERROR_DS_LOCAL_USER = 0xC00E0090  # A local user is authenticated as an anonymous user and cannot access Active Directory
MQ_ERROR_Q_ADS_PROPERTY_NOT_SUPPORTED = 0xC00E0091  # The column PROPID_Q_ADS_PATH is not supported for the API
MQ_ERROR_BAD_XML_FORMAT = 0xC00E0092  # The given property is not a valid XML document
MQ_ERROR_UNSUPPORTED_CLASS = 0xC00E0093  # The Active Directory object specified is not an instance of a supported class
MQ_ERROR_UNINITIALIZED_OBJECT = 0xC00E0094  # The MSMQManagement object must be initialized before it is used
MQ_ERROR_CANNOT_CREATE_PSC_OBJECTS = 0xC00E0095  # The create object operation cannot be performed because the object must be owned by a PSC
MQ_ERROR_CANNOT_UPDATE_PSC_OBJECTS = 0xC00E0096  # The update operation cannot be performed because the designated object is owned by a PSC
MQ_ERROR_RESOLVE_ADDRESS = 0xC00E0099  # Message Queuing is not able to resolve the address specified by the user
MQ_ERROR_TOO_MANY_PROPERTIES = 0xC00E009A  # Too many properties passed to the function
MQ_ERROR_MESSAGE_NOT_AUTHENTICATED = 0xC00E009B  # The queue only accepts authenticated messages
MQ_ERROR_MESSAGE_LOCKED_UNDER_TRANSACTION = 0xC00E009C  # The message is currently being processed under a transaction

# Named by MS-MQQP 3.1.4.6 (RemoteQMCancelReceive's iStatus) but absent from MS-MQMQ 2.4
MQ_INFORMATION_REMOTE_CANCELED_BY_CLIENT = 0x400E03E9

# NTSTATUS values (MS-ERREF 2.3) used by MS-MQDMPR 3.1.7.1.17 and MS-MQQP 3.1.4
STATUS_SUCCESS = 0x00000000
STATUS_INVALID_PARAMETER = 0xC000000D
STATUS_NOT_FOUND = 0xC0000225
STATUS_INVALID_HANDLE = 0xC0000008

NAMES: dict[int, str] = {}
for _name, _value in list(globals().items()):
    if (_name.startswith("MQ_") or _name.startswith("STATUS_")) and isinstance(_value, int):
        NAMES.setdefault(_value, _name)


def status_name(status: int) -> str:
    """The symbolic name of a status code (MS-MQMQ 2.4), or its hex form when unknown."""
    return NAMES.get(status, f"0x{status:08X}")
